"""The Streamable HTTP MCP endpoint (MCP 2025-11-25 "Transports" / "Streamable HTTP").

One URL, three methods, every one of them behind a bearer token:

* **POST** one JSON-RPC message. Requests get ``application/json``, except
  ``tools/call`` under ASGI, which gets ``text/event-stream`` so the tool can send
  notifications before its result ("Sending Messages to the Server").
  Notifications and responses get ``202 Accepted`` with no body.
* **GET** opens the session's SSE stream for server-initiated messages (the
  outbox), resumable with ``Last-Event-ID`` ("Listening for Messages from the
  Server", "Resumability and Redelivery"). ASGI only; 405 under WSGI.
* **DELETE** ends the session ("Session Management"): 204, then 404 for its id.

Checks, in order (the first failing one answers):

=========================================================  ======  ==============
check                                                      status  JSON-RPC code
=========================================================  ======  ==============
URL is not an enabled protected resource                   404     -32600
``Origin`` present and not allowed (DNS rebinding,         403     -32600
"Security Warning")
bearer token (missing, invalid, foreign, expired; scope)   401/403 (challenge)
POST: ``Accept`` lacks ``application/json`` or             406     -32600
``text/event-stream``; GET: lacks ``text/event-stream``
POST: ``Content-Type`` not ``application/json``            415     -32600
POST: body larger than ``MAX_REQUEST_BYTES``               413     -32600
POST: not JSON                                             400     -32700
POST: not one JSON-RPC 2.0 message (batches too)           400     -32600
request for a method this server does not have             200     -32601
``MCP-Protocol-Version`` present but unsupported           400     -32022
no ``Mcp-Session-Id`` (all but ``initialize``)             400     -32600
unknown/ended/expired session, or another principal's      404     -32600
invalid params, unknown tool, invalid tool arguments       200     -32602
tool needs scopes the token lacks (step-up)                403     (challenge)
=========================================================  ======  ==============

An unknown method is answered before the version and session checks, so the
``server/discover`` probe of 2026-07-28 clients (sent with
``MCP-Protocol-Version: 2026-07-28`` and no session) gets -32601 and the client
falls back to ``initialize``.

The endpoint serves the tools of ``MCP_OAUTH["TOOL_REGISTRY"]``; a site with
several registries routes its own :class:`McpView` instances::

    path("tenant-a/mcp", McpView.as_view(registry=tenant_a_tools))

(the URL must be a :class:`~mcp_oauth.models.ProtectedResource` too).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt

from ..cors import mcp_cors, origin_allowed
from ..models import McpSession, ProtectedResource
from ..registry import handlers as registry_handlers
from ..registry.context import RequestContext
from ..registry.errors import InsufficientScope
from ..resource_server.authentication import BearerChallenge, BearerPrincipal, authenticate_bearer
from ..resources import InvalidResource
from ..settings import mcp_oauth_settings
from ..signals import client_response_received, mcp_session_ended
from ..tools import ToolRegistry
from . import dispatch
from .context import pending_requests
from .jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    Incoming,
    JsonRpcError,
    McpError,
    dumps,
    error_message,
    parse_message,
    result_message,
)
from .sessions import end_session, find_session
from .sse import outbox_stream, request_stream

__all__ = ["McpView", "mcp_endpoint"]

logger = logging.getLogger("mcp_oauth.transport")

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
_EVENT_ID_RE = re.compile(r"^[0-9]{1,18}$")


def json_response(message: Any, status: int = 200) -> HttpResponse:
    response = HttpResponse(dumps(message), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def error_response(exc: JsonRpcError) -> HttpResponse:
    return json_response(error_message(exc.request_id, exc), status=exc.http_status)


def _sse_response(stream) -> StreamingHttpResponse:
    response = StreamingHttpResponse(stream, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response


def _media_ranges(request: HttpRequest) -> set[str]:
    header = request.headers.get("Accept", "")
    return {part.split(";", 1)[0].strip().lower() for part in header.split(",") if part.strip()}


def accepts_json_and_sse(request: HttpRequest) -> bool:
    """POST ``Accept``: both ``application/json`` and ``text/event-stream`` (wildcards count)."""
    ranges = _media_ranges(request)
    json_ok = bool(ranges & {"application/json", "application/*", "*/*"})
    sse_ok = bool(ranges & {"text/event-stream", "text/*", "*/*"})
    return json_ok and sse_ok


def accepts_sse(request: HttpRequest) -> bool:
    """GET ``Accept``: ``text/event-stream`` (wildcards count)."""
    return bool(_media_ranges(request) & {"text/event-stream", "text/*", "*/*"})


def is_asgi(request: HttpRequest) -> bool:
    """True when served by an ASGI server (the only case where responses can stream)."""
    return isinstance(request, ASGIRequest)


def check_protocol_version(request: HttpRequest, request_id: Any = None) -> str | None:
    """The ``MCP-Protocol-Version`` header, when present.

    :raises JsonRpcError: -32022 (HTTP 400) for a version this server does not speak
        (MCP 2025-11-25 "Protocol Version Header": "MUST respond with 400 Bad Request");
        ``data`` is ``{"supported": [...], "requested": "..."}``.
    """
    value = request.headers.get(VERSION_HEADER)
    if value is None:
        return None
    value = value.strip()
    if value not in dispatch.SUPPORTED_PROTOCOL_VERSIONS:
        shown = value[:40]
        raise JsonRpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Bad Request: unsupported {VERSION_HEADER}: {shown!r}",
            data={"supported": list(dispatch.SUPPORTED_PROTOCOL_VERSIONS), "requested": shown},
            http_status=400,
            request_id=request_id,
        )
    return value


def read_body(request: HttpRequest) -> bytes:
    """The POST body, refusing more than ``MAX_REQUEST_BYTES`` (413) before parsing it."""
    limit = int(mcp_oauth_settings.MAX_REQUEST_BYTES)
    too_large = JsonRpcError(INVALID_REQUEST, f"Request body larger than {limit} bytes", http_status=413)
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise too_large
    try:
        body = request.body
    except RequestDataTooBig:
        raise too_large from None
    if len(body) > limit:
        raise too_large
    return body


def _authorize(request: HttpRequest, origin_ok: bool) -> ProtectedResource | BearerPrincipal | HttpResponse:
    """Resolve the resource from the URL, check the Origin, authenticate (one thread hop)."""
    try:
        resource = ProtectedResource.objects.get_by_uri(mcp_oauth_settings.absolute(request.path))
    except (ProtectedResource.DoesNotExist, InvalidResource):
        return error_response(JsonRpcError(INVALID_REQUEST, "Not Found: no MCP endpoint at this URL", http_status=404))
    if not origin_ok:
        return error_response(JsonRpcError(INVALID_REQUEST, "Forbidden: Origin not allowed", http_status=403))
    try:
        return authenticate_bearer(request, resource)
    except BearerChallenge as challenge:
        return challenge.response()


class McpView:
    """The MCP endpoint as a configurable object.

    :param registry: the :class:`~mcp_oauth.tools.ToolRegistry` to serve, or the
        dotted path of one; None: ``MCP_OAUTH["TOOL_REGISTRY"]``, read on every request.
    """

    def __init__(self, registry: ToolRegistry | str | None = None) -> None:
        self._registry = registry

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., Any]:
        """An async Django view (CSRF-exempt, with MCP CORS) serving ``cls(**initkwargs)``."""
        instance = cls(**initkwargs)

        async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return await instance.dispatch(request)

        view.view_class = cls  # type: ignore[attr-defined]
        view.view_initkwargs = initkwargs  # type: ignore[attr-defined]
        return mcp_cors(csrf_exempt(view))

    @property
    def registry(self) -> ToolRegistry:
        registry = self._registry
        if registry is None:
            registry = mcp_oauth_settings.TOOL_REGISTRY
        if isinstance(registry, str):
            registry = import_string(registry)
        return registry

    async def dispatch(self, request: HttpRequest) -> HttpResponse:
        """Authorize, then route by HTTP method; protocol errors become JSON-RPC error responses."""
        origin = request.headers.get("Origin")
        origin_ok = origin is None or origin_allowed(origin)
        outcome = await sync_to_async(_authorize)(request, origin_ok)
        if isinstance(outcome, HttpResponse):
            return outcome
        principal = outcome
        handler = {"POST": self.post, "GET": self.get, "DELETE": self.delete}.get(request.method or "")
        if handler is None:
            response = json_response(
                error_message(None, McpError(INVALID_REQUEST, "Method Not Allowed")), status=405
            )
            response["Allow"] = "GET, POST, DELETE" if is_asgi(request) else "POST, DELETE"
            return response
        try:
            return await handler(request, principal)
        except JsonRpcError as exc:
            return error_response(exc)

    async def require_session(
        self, request: HttpRequest, principal: BearerPrincipal, request_id: Any = None
    ) -> McpSession:
        """The live session named by ``Mcp-Session-Id`` and owned by ``principal``.

        :raises JsonRpcError: 400 without the header; 404 for any id that is not a live
            session of this user, client and resource (one answer for all cases).
        """
        session_id = request.headers.get(SESSION_HEADER)
        if not session_id or not session_id.strip():
            raise JsonRpcError(
                INVALID_REQUEST,
                f"Bad Request: {SESSION_HEADER} header is required",
                http_status=400,
                request_id=request_id,
            )
        session = await sync_to_async(find_session)(session_id.strip(), principal)
        if session is None:
            raise JsonRpcError(
                INVALID_REQUEST, "Not Found: unknown or terminated session", http_status=404, request_id=request_id
            )
        return session

    # --- POST ----------------------------------------------------------------------------

    async def post(self, request: HttpRequest, principal: BearerPrincipal) -> HttpResponse:
        if not accepts_json_and_sse(request):
            raise JsonRpcError(
                INVALID_REQUEST,
                "Not Acceptable: Accept must list application/json and text/event-stream",
                http_status=406,
            )
        if request.content_type != "application/json":
            raise JsonRpcError(
                INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json", http_status=415
            )
        incoming = parse_message(read_body(request))
        if incoming.kind == "request":
            return await self.handle_request(request, principal, incoming)
        check_protocol_version(request)
        session = await self.require_session(request, principal)
        if incoming.kind == "notification":
            if incoming.method == "notifications/cancelled":
                dispatch.cancel_request(session.pk, incoming.params.get("requestId"))
        elif not pending_requests.deliver(session.pk, incoming.raw):
            responses = await client_response_received.asend_robust(
                sender=McpSession, session=session, message=incoming.raw
            )
            for receiver, outcome in responses:
                if isinstance(outcome, Exception):
                    logger.error("client_response_received receiver %r failed", receiver, exc_info=outcome)
        return HttpResponse(status=202)

    async def handle_request(
        self, request: HttpRequest, principal: BearerPrincipal, incoming: Incoming
    ) -> HttpResponse:
        message_id = incoming.id
        method = incoming.method or ""
        if method not in dispatch.METHODS:
            shown = method[:100]
            return json_response(error_message(message_id, McpError(METHOD_NOT_FOUND, f"Method not found: {shown}")))
        check_protocol_version(request, message_id)
        call = dispatch.Call(
            request=request,
            principal=principal,
            registry=self.registry,
            message_id=message_id,
            params=incoming.params,
            protocol_version=dispatch.LATEST_PROTOCOL_VERSION,
        )
        if method == "initialize":
            try:
                result, session = await dispatch.initialize(call)
            except McpError as exc:
                return json_response(error_message(message_id, exc))
            response = json_response(result_message(message_id, result))
            response[SESSION_HEADER] = session.pk
            return response

        call.session = await self.require_session(request, principal, message_id)
        call.protocol_version = call.session.protocol_version
        if method == "tools/call":
            return await self.call_tool(request, call)
        if method in dispatch.REGISTRY_HANDLERS:
            return await self.call_registry(request, call, method)
        try:
            result = await dispatch.HANDLERS[method](call)
        except McpError as exc:
            return json_response(error_message(message_id, exc))
        return json_response(result_message(message_id, result))

    async def call_tool(self, request: HttpRequest, call: dispatch.Call) -> HttpResponse:
        """``tools/call``: validate, check the tool's scopes (403 step-up), run; stream under ASGI."""
        try:
            prepared = dispatch.prepare_tool_call(call)
        except dispatch.ScopeRequired as exc:
            principal = call.principal
            resource = principal.resource
            scopes = list(dict.fromkeys([*sorted(principal.scopes), *resource.scope_list, *exc.tool.scopes]))
            return BearerChallenge(
                resource,
                status=403,
                error="insufficient_scope",
                error_description=f"The tool {exc.tool.name} needs the scopes: {' '.join(exc.missing)}",
                scopes=scopes,
            ).response()
        except McpError as exc:
            return json_response(error_message(call.message_id, exc))

        if not is_asgi(request):
            return json_response(await dispatch.run_tool_call(call, prepared))

        async def run(sink):
            return await dispatch.run_tool_call(call, prepared, sink)

        stream = request_stream(run, keepalive_seconds=float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS))
        return _sse_response(stream)

    async def call_registry(self, request: HttpRequest, call: dispatch.Call, method: str) -> HttpResponse:
        """Resources, prompts and completion (:mod:`mcp_oauth.registry`); missing item scopes: 403 step-up."""
        ctx = RequestContext.for_principal(
            call.principal,
            request=request,
            session=call.session,
            protocol_version=call.protocol_version,
            method=method,
        )
        try:
            result = await registry_handlers.handle(method, ctx, call.params)
        except InsufficientScope as exc:
            principal = call.principal
            resource = principal.resource
            scopes = list(dict.fromkeys([*sorted(principal.scopes), *resource.scope_list, *exc.required]))
            return BearerChallenge(
                resource, status=403, error="insufficient_scope", error_description=str(exc), scopes=scopes
            ).response()
        except McpError as exc:
            return json_response(error_message(call.message_id, exc))
        return json_response(result_message(call.message_id, result))

    # --- GET -----------------------------------------------------------------------------

    async def get(self, request: HttpRequest, principal: BearerPrincipal) -> HttpResponse:
        """Open the session's SSE stream (outbox), resuming after ``Last-Event-ID``."""
        if not is_asgi(request):
            response = json_response(
                error_message(None, McpError(INVALID_REQUEST, "Method Not Allowed: no SSE stream on this server")),
                status=405,
            )
            response["Allow"] = "POST, DELETE"
            return response
        if not accepts_sse(request):
            raise JsonRpcError(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream", http_status=406)
        check_protocol_version(request)
        session = await self.require_session(request, principal)
        after = 0
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None and last_event_id.strip():
            value = last_event_id.strip()
            if not _EVENT_ID_RE.match(value):
                raise JsonRpcError(
                    INVALID_REQUEST,
                    "Bad Request: Last-Event-ID does not name a resumable event of this session's stream",
                    http_status=400,
                )
            after = int(value)
        stream = outbox_stream(
            session.pk,
            after,
            poll_seconds=float(mcp_oauth_settings.SSE_POLL_INTERVAL_SECONDS),
            keepalive_seconds=float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS),
        )
        return _sse_response(stream)

    # --- DELETE --------------------------------------------------------------------------

    async def delete(self, request: HttpRequest, principal: BearerPrincipal) -> HttpResponse:
        """End the session: 204; its id is unknown (404) from then on."""
        check_protocol_version(request)
        session = await self.require_session(request, principal)
        ended = await sync_to_async(end_session)(session)
        dispatch.cancel_session_requests(session.pk)
        if ended:
            await mcp_session_ended.asend(sender=McpSession, session=session)
        return HttpResponse(status=204)


#: The default endpoint (``mcp_oauth.urls`` routes ``MCP_PATH`` to it).
mcp_endpoint = McpView.as_view()
