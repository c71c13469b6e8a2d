"""A DRF view run for a tool call: a real DRF request built in-process (no HTTP round trip), the
view's permissions and throttles as they are, its response turned into a ``CallToolResult``.

* **Who calls**: the view's authentication classes are replaced by
  :class:`ToolPrincipalAuthentication`, which answers the tool call's bearer principal: ``request.user``
  is the token's user (``AnonymousUser`` for a client-credentials token), ``request.auth`` the
  :class:`~mcp_oauth.resource_server.authentication.BearerPrincipal`. Permission classes (object
  permissions included) and throttles run unchanged, so a refusal is the HTTP API's own.
* **The request**: ``GET``/``DELETE`` arguments travel as the query string, the others as a JSON body;
  the detail actions' lookup value as the URL keyword argument; ``REMOTE_ADDR``, ``X-Forwarded-For``,
  the host and the scheme are the MCP request's (throttles and absolute URLs see the caller).
  Parsers and renderers are JSON only. ``ATOMIC_REQUESTS`` wraps the view as Django would.
* **The answer** (:func:`to_result`): 2xx -> ``structuredContent`` (a list wrapped as ``{"results": [...]}``)
  plus its JSON as text, a body-less 2xx -> a text block; 400 -> ``isError: true`` naming each field
  and message (``structuredContent``: ``{"status": 400, "errors": [{"field", "message"}]}``, nested
  fields dotted: ``author.name``, ``items.0.title``), so the model can correct its arguments; any other
  status -> ``isError: true`` whose text is the response's ``detail`` word for word (the HTTP API's
  403 and 404 messages), ``structuredContent`` ``{"status", "detail", "code"}``. A string with a lone
  surrogate (valid JSON, ``"\\ud800"``, but no UTF-8 text) is refused as a 400 naming the argument
  before the view runs, with DRF's own message (the HTTP API refuses it the same way).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import mcp_types as types
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest
from django.test.client import RequestFactory
from django.urls import NoReverseMatch, reverse
from rest_framework.authentication import BaseAuthentication
from rest_framework.renderers import JSONRenderer
from rest_framework.settings import api_settings

from mcp_oauth.mcp_server.transport.context import ToolContext

__all__ = ["Endpoint", "ToolPrincipalAuthentication", "flatten_errors", "run_endpoint", "to_result"]

#: The MCP request's META entries the view's request keeps (throttles, absolute URLs, logs).
FORWARDED_META = ("REMOTE_ADDR", "HTTP_X_FORWARDED_FOR", "HTTP_USER_AGENT", "HTTP_HOST", "SERVER_NAME", "SERVER_PORT")
#: Most field errors a 400 result lists (like the registry's own argument errors).
MAX_ERRORS = 20
_METHODS_WITH_QUERY = frozenset({"get", "delete", "head", "options"})
_factory = RequestFactory()
_SURROGATE = re.compile("[\ud800-\udfff]")


class ToolPrincipalAuthentication(BaseAuthentication):
    """The tool call's principal as the DRF request's ``(user, auth)``; installed in place of the
    view's authentication classes when the view runs as a tool. Without a principal: anonymous."""

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        principal = getattr(request._request, "mcp_principal", None)
        if principal is None:
            return None
        return (principal.user if principal.user is not None else AnonymousUser(), principal)

    def authenticate_header(self, request: Any) -> None:
        return None  # NotAuthenticated stays 403 with DRF's detail: there is no challenge to send in a tool


@dataclass
class Endpoint:
    """How one tool reaches its view.

    ``view`` is the view function (``as_view`` with the tool's authentication); ``method`` the HTTP
    method (lower case); ``url_kwargs`` the argument names passed as URL keyword arguments (a detail
    action's lookup); ``url_name`` the URL name reversed for the request's path (else ``fallback_path``);
    ``wrap_list``: a list answer becomes ``{"results": [...]}``.
    """

    tool_name: str
    view: Callable[..., Any]
    method: str
    url_kwargs: tuple[str, ...] = ()
    url_name: str | None = None
    fallback_path: str = "/"

    @classmethod
    def of(cls, tool_name: str, view: Callable[..., Any], method: str, **options: Any) -> Endpoint:
        """The endpoint of ``view`` wrapped in a transaction per database with ``ATOMIC_REQUESTS``
        (:meth:`django.core.handlers.base.BaseHandler.make_view_atomic`)."""
        return cls(tool_name, BaseHandler().make_view_atomic(view), method.lower(), **options)

    def path(self, kwargs: Mapping[str, str]) -> str:
        if self.url_name:
            try:
                return reverse(self.url_name, kwargs=dict(kwargs) or None)
            except NoReverseMatch:
                pass
        return self.fallback_path


def _meta(ctx: ToolContext) -> dict[str, Any]:
    meta = getattr(ctx.request, "META", None) or {}
    return {key: meta[key] for key in FORWARDED_META if isinstance(meta.get(key), str)}


def build_request(ctx: ToolContext, endpoint: Endpoint, arguments: Mapping[str, Any]) -> tuple[HttpRequest, dict]:
    """The Django request the view gets, and the URL keyword arguments."""
    kwargs = {name: str(arguments[name]) for name in endpoint.url_kwargs if name in arguments}
    rest = {name: value for name, value in arguments.items() if name not in endpoint.url_kwargs}
    secure = bool(getattr(ctx.request, "is_secure", lambda: False)())
    extra = {**_meta(ctx), "HTTP_ACCEPT": "application/json"}
    path = endpoint.path(kwargs)
    if endpoint.method in _METHODS_WITH_QUERY:
        query = {name: _query_value(value) for name, value in rest.items() if value is not None}
        request = _factory.generic(endpoint.method.upper(), path, secure=secure, query_params=query, **extra)
    else:
        body = json.dumps(rest, ensure_ascii=False, allow_nan=False)
        request = _factory.generic(
            endpoint.method.upper(), path, body, content_type="application/json", secure=secure, **extra
        )
    request.mcp_principal = ctx.principal  # type: ignore[attr-defined]  # read by ToolPrincipalAuthentication
    return request, kwargs


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return [_query_value(item) for item in value]
    return value if isinstance(value, str) else json.dumps(value) if isinstance(value, dict) else str(value)


def surrogate_errors(value: Any, prefix: str = "") -> Iterator[dict[str, str]]:
    """``{"field", "message"}`` for each string in ``value`` (keys included) holding a lone surrogate
    (a JSON string may escape one; it has no UTF-8 form, so no request or row can carry it)."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        if found is not None:
            yield {"field": prefix, "message": f"Surrogate characters are not allowed: U+{ord(found.group()):X}."}
    elif isinstance(value, Mapping):
        for key, item in value.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            yield from surrogate_errors(key, name) if isinstance(key, str) else iter(())
            yield from surrogate_errors(item, name)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from surrogate_errors(item, f"{prefix}.{index}" if prefix else str(index))


def run_endpoint(ctx: ToolContext, endpoint: Endpoint, arguments: Mapping[str, Any]) -> types.CallToolResult:
    """Run the view (sync: the caller is in a worker thread) and convert its response."""
    errors = list(surrogate_errors(arguments))[:MAX_ERRORS]
    if errors:
        return _invalid_arguments(endpoint.tool_name, errors)
    request, kwargs = build_request(ctx, endpoint, arguments)
    response = endpoint.view(request, **kwargs)
    return to_result(endpoint.tool_name, response)


def flatten_errors(data: Any, prefix: str = "") -> Iterator[dict[str, str]]:
    """DRF's ``ValidationError`` detail as ``{"field": "a.b", "message": "..."}`` items (the
    serializer's non-field errors under ``""``)."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = "" if key == api_settings.NON_FIELD_ERRORS_KEY and not prefix else str(key)
            yield from flatten_errors(value, f"{prefix}.{name}" if prefix and name else prefix or name)
    elif isinstance(data, (list, tuple)):
        if all(isinstance(item, str) for item in data):
            for item in data:
                yield {"field": prefix, "message": _short(str(item))}
        else:
            for index, item in enumerate(data):
                if item:  # a ListSerializer's errors hold {} for the items that passed
                    yield from flatten_errors(item, f"{prefix}.{index}" if prefix else str(index))
    elif data is not None:
        yield {"field": prefix, "message": _short(str(data))}


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _jsonable(data: Any) -> Any:
    if data is None:
        return None
    rendered = JSONRenderer().render(data)
    return json.loads(rendered) if rendered else None


def _plain_body(response: Any) -> Any:
    """A plain Django response's body (a view that returned ``JsonResponse`` or ``HttpResponse``):
    its JSON, else its text; None when empty or streamed."""
    if getattr(response, "streaming", False) or not response.content:
        return None
    text = response.content.decode(response.charset or "utf-8", errors="replace")
    if response.get("Content-Type", "").split(";")[0].strip() == "application/json":
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return str(status)


def _invalid_arguments(tool_name: str, errors: list[dict[str, str]]) -> types.CallToolResult:
    """The 400 result: ``isError``, each field named, ``{"status": 400, "errors": [...]}``."""
    listed = "; ".join(f"{e['field'] or '(arguments)'}: {e['message']}" for e in errors)
    return types.CallToolResult(
        content=[types.TextContent(text=f"Invalid arguments for tool {tool_name!r}: {listed}")],
        structured_content={"status": 400, "errors": errors},
        is_error=True,
    )


def to_result(tool_name: str, response: Any) -> types.CallToolResult:
    """The view's ``Response`` as a ``CallToolResult`` (see the module docstring)."""
    status = int(response.status_code)
    data = getattr(response, "data", None)
    jsonable = _jsonable(data) if hasattr(response, "data") else _plain_body(response)
    if 200 <= status < 300:
        if jsonable is None:
            return types.CallToolResult(content=[types.TextContent(text=f"Done (HTTP {_status_line(status)}).")])
        if isinstance(jsonable, str):  # a plain text answer
            return types.CallToolResult(content=[types.TextContent(text=jsonable)])
        structured = jsonable if isinstance(jsonable, dict) else {"results": jsonable}
        text = json.dumps(structured, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)
    if status == 400 and jsonable is not None:
        return _invalid_arguments(tool_name, list(flatten_errors(jsonable))[:MAX_ERRORS])
    detail = data.get("detail") if isinstance(data, Mapping) else None
    if detail is not None:
        text = str(detail)
    elif isinstance(jsonable, str):
        text = _short(jsonable, 1000)
    elif jsonable is not None:
        text = json.dumps(jsonable, ensure_ascii=False)
    else:
        text = f"HTTP {status}"
    refusal: dict[str, Any] = {"status": status, "detail": text}
    code = getattr(detail, "code", None)
    if isinstance(code, str):
        refusal["code"] = code
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=refusal, is_error=True)
