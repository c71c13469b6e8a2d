"""The method table's building blocks: :class:`Call`, :class:`Method`, :class:`MethodTable`.

HTTP-free on purpose: the Django view (:mod:`.views`) and any other front end (an ASGI lane)
turn a request into a :class:`Call`, look the method up in a :class:`MethodTable`
(:data:`mcp_oauth.mcp_server.transport.methods.methods`) and hand the call to :meth:`MethodTable.serve`,
which returns the JSON-RPC response message. A handler is ``async def handler(call) -> result``
where ``result`` is an ``mcp_types`` result model or a plain dict in the wire shape; it raises
:class:`~.jsonrpc.McpError` for a JSON-RPC error and :class:`InsufficientScope` when the token
lacks a scope (the front end answers HTTP 403 ``insufficient_scope``).

See :mod:`mcp_oauth.mcp_server.transport.methods` for the registration API and the table itself.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, Literal

import mcp_types as types
from mcp_types import methods as mcp_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from mcp_oauth.mcp_server.transport import observers
from mcp_oauth.mcp_server.transport.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    JsonRpcError,
    McpError,
    error_message,
    result_message,
)
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.text import storable

if TYPE_CHECKING:
    from mcp_oauth.mcp_server.transport.context import MessageSink
    from mcp_oauth.mcp_server.transport.input_required import InputRound
    from mcp_oauth.models import McpSession
    from mcp_oauth.resource_server.authentication import BearerPrincipal

__all__ = [
    "ALL_ERAS",
    "HANDSHAKE_VERSIONS",
    "LEGACY",
    "MODERN",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "Call",
    "CachePolicy",
    "InsufficientScope",
    "Method",
    "MethodTable",
    "http_status",
    "parse_params",
    "server_info",
    "unstorable_field",
]

logger = logging.getLogger("mcp_oauth.transport")

Era = Literal["legacy", "modern"]
#: The 2025-11-25 handshake family: ``initialize``, ``Mcp-Session-Id``, live server→client requests.
LEGACY: Era = "legacy"
#: 2026-07-28: stateless requests carrying the ``_meta`` envelope (no session).
MODERN: Era = "modern"
ALL_ERAS: frozenset[str] = frozenset({LEGACY, MODERN})

#: Handshake revisions served, newest first (MCP 2025-11-25 "Lifecycle" / "Version Negotiation").
HANDSHAKE_VERSIONS: tuple[str, ...] = tuple(reversed([v for v in HANDSHAKE_PROTOCOL_VERSIONS]))
#: Stateless revisions served, newest first (MCP 2026-07-28 "Basic" / "Per-request protocol fields").
MODERN_VERSIONS: tuple[str, ...] = tuple(reversed(MODERN_PROTOCOL_VERSIONS))
#: Every revision this endpoint speaks, newest first (``server/discover`` ``supportedVersions``,
#: ``data.supported`` of -32022).
SUPPORTED_VERSIONS: tuple[str, ...] = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)

#: MCP 2026-07-28 "Transports" / "Error handling": JSON-RPC code -> HTTP status of a modern
#: request's error response (every other code: 200).
MODERN_ERROR_STATUS: dict[int, int] = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    METHOD_NOT_FOUND: 404,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
}


def http_status(era: str, error: McpError) -> int:
    """The HTTP status of an error response: a :class:`JsonRpcError`'s own status; in the modern
    era the spec's table (:data:`MODERN_ERROR_STATUS`); else 200 (MCP 2025-11-25 answers
    request errors inside a 200 response)."""
    if isinstance(error, JsonRpcError) and error.http_status != 200:
        return error.http_status
    if era == MODERN:
        return MODERN_ERROR_STATUS.get(error.code, 200)
    return 200


@dataclass(frozen=True)
class CachePolicy:
    """How a list/read result may be cached by the client (MCP 2026-07-28 ``CacheableResult``).

    ``scope`` is ``"public"`` (same for every caller) or ``"private"`` (depends on the user or
    token); ``ttl_ms`` None: ``MCP_OAUTH["RESULT_TTL_MS"]``.
    """

    scope: Literal["public", "private"] = "private"
    ttl_ms: int | None = None

    def fields(self) -> dict[str, Any]:
        ttl = self.ttl_ms if self.ttl_ms is not None else int(mcp_oauth_settings.RESULT_TTL_MS)
        return {"ttlMs": max(0, int(ttl)), "cacheScope": self.scope}


#: Result depends on the user or token (scope-filtered lists, per-user reads).
PRIVATE = CachePolicy("private")
#: Result is the same for everyone who may call the method.
PUBLIC = CachePolicy("public")


class InsufficientScope(Exception):
    """The token lacks ``missing`` scopes for ``what`` (e.g. a tool); the front end answers 403
    ``insufficient_scope`` naming ``required`` (every scope the operation needs; RFC 6750 §3.1,
    MCP "Scope Challenge Handling")."""

    def __init__(self, what: str, missing: Iterable[str], required: Iterable[str] = ()) -> None:
        self.what = what
        self.missing = list(missing)
        self.required = list(dict.fromkeys([*required, *self.missing]))
        super().__init__(f"{what} needs the scopes: {' '.join(self.missing)}")


@dataclass
class Call:
    """One JSON-RPC request being served, whatever the era and the front end.

    :param method: / ``message_id`` / ``params``: from the JSON-RPC request (``params`` is a dict).
    :param principal: the authenticated bearer token
        (:class:`~mcp_oauth.resource_server.authentication.BearerPrincipal`).
    :param registry: the tool registry served (anything with ``get(name)`` and ``list()``).
    :param era: :data:`LEGACY` or :data:`MODERN`.
    :param protocol_version: negotiated (legacy) or from ``_meta`` (modern).
    :param session: the :class:`~mcp_oauth.models.McpSession` (legacy; None for ``initialize`` and
        every modern request).
    :param client_capabilities: / ``client_info``: from ``_meta`` (modern) or the session.
    :param log_level: minimum level of ``notifications/message`` (modern: ``_meta`` logLevel, None:
        send none; legacy: the session's ``logging/setLevel``, None: send all).
    :param sink: coroutine function putting a message on this request's response stream (None:
        JSON response, notifications are dropped); ``open_stream()`` commits the response to SSE.
    :param http_request: the front end's request object (a Django ``HttpRequest``), handed to tools
        as ``ctx.request``; handlers must not need it.
    """

    method: str
    message_id: int | str
    params: dict[str, Any]
    principal: BearerPrincipal
    registry: Any
    era: str = LEGACY
    protocol_version: str = "2025-03-26"
    session: McpSession | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    sink: MessageSink | None = field(default=None, repr=False)
    open_stream: Callable[[], None] = field(default=lambda: None, repr=False)
    http_request: Any = field(default=None, repr=False)
    input_round: InputRound | None = field(default=None, repr=False)

    @property
    def modern(self) -> bool:
        return self.era == MODERN

    @property
    def meta(self) -> dict[str, Any]:
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}


Handler = Callable[[Call], Awaitable[Any]]


@dataclass(frozen=True)
class Method:
    """One entry of the table.

    :param name: the JSON-RPC method.
    :param handler: ``async def handler(call: Call) -> result``.
    :param eras: where it exists (:data:`LEGACY`, :data:`MODERN`); elsewhere it is -32601.
    :param session: legacy only: needs an ``Mcp-Session-Id`` of the caller (all but ``initialize``).
    :param name_param: the params key mirrored in the ``Mcp-Name`` header (modern; e.g. ``"name"``
        for ``tools/call``, ``"uri"`` for ``resources/read``).
    :param capability: a client capability path that must be declared (modern: -32021 otherwise),
        e.g. ``("elicitation",)``; None: none.
    :param cache: list/read results: their :class:`CachePolicy` (``ttlMs``/``cacheScope`` added in
        the modern era); None: not cacheable.
    :param streams: the handler may send notifications on the request's response stream (the
        front end offers an SSE response; ``subscriptions/listen`` and ``tools/call``).
    """

    name: str
    handler: Handler
    eras: frozenset[str] = ALL_ERAS
    session: bool = True
    name_param: str | None = None
    capability: tuple[str, ...] | None = None
    cache: CachePolicy | None = None
    streams: bool = False


@functools.cache
def package_version() -> str:
    """This package's installed version ("0" when running from an uninstalled source tree).

    Read once per process: ``importlib.metadata`` parses the distribution's whole ``METADATA``
    file (the README included) on every call, ~2 ms, which every 2026-07-28 result's
    ``serverInfo`` would otherwise pay.
    """
    try:
        return metadata.version("django-mcp-authz")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


def server_info() -> dict[str, str]:
    """``Implementation`` of this server: ``{"name", "version"}`` from ``SERVER_NAME``/``SERVER_VERSION``
    (None: :func:`package_version`), read on every call (settings may change at run time)."""
    version = mcp_oauth_settings.SERVER_VERSION or package_version()
    return {"name": str(mcp_oauth_settings.SERVER_NAME), "version": str(version)}


def _invalid_params(method: str, exc: ValidationError) -> McpError:
    fields = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False)[:20]:
        loc = list(error["loc"])
        if loc and loc[0] == "params":
            loc = loc[1:]
        location = ".".join(str(part) for part in loc) or "params"
        fields.append({"field": location, "message": error["msg"]})
    listed = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
    return McpError(INVALID_PARAMS, f"Invalid params for {method}: {listed}", {"errors": fields})


#: Compact JSON without ASCII escaping: NUL comes out as ``\u0000``, a lone surrogate as itself.
_TEXT_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False)


def unstorable_field(params: Any) -> str | None:
    """The dotted path (``"arguments.note"``, ``"params"`` for the top) of the first string in
    ``params``, or object key, that is not :func:`~mcp_oauth.shared.text.storable` text (a NUL, a lone
    surrogate), else None. PostgreSQL refuses NUL in text and jsonb.

    Every request's params go through here: the common answer (all text storable) comes from one
    JSON encoding in C (no ``\u0000`` in it, and it encodes as UTF-8); only params that fail
    that test, or are not JSON, are walked to name the field."""
    try:
        text = _TEXT_ENCODER.encode(params)
        text.encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError):
        return _unstorable_path(params)
    if "\\u0000" in text:  # a NUL, or a backslash followed by "u0000" (walked to tell them apart)
        return _unstorable_path(params)
    return None


def _unstorable_path(params: Any) -> str | None:
    stack: list[tuple[Any, str]] = [(params, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                child = f"{path}.{key}" if path else str(key)
                if not storable(key):
                    return path or "params"
                stack.append((value, child))
        elif isinstance(item, list):
            stack.extend((value, f"{path}.{index}" if path else str(index)) for index, value in enumerate(item))
        elif isinstance(item, str) and not storable(item):
            return path or "params"
    return None


def _unstorable_params(method: str, location: str) -> McpError:
    message = "must be text without NUL characters or unpaired surrogates"
    return McpError(
        INVALID_PARAMS,
        f"Invalid params for {method}: {location} {message}",
        {"errors": [{"field": location, "message": message}]},
    )


def parse_params(call: Call, method: str | None = None) -> Any:
    """The ``mcp_types`` request model of the call validated for its protocol version; its ``params``.

    :raises McpError: -32602 when the params do not validate.
    """
    method = method or call.method
    try:
        request = mcp_methods.parse_client_request(method, call.protocol_version, call.params)
    except ValidationError as exc:
        raise _invalid_params(method, exc) from None
    return request.params


def _dump(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(by_alias=True, exclude_none=True, mode="json")
    if result is None:
        return {}
    if not isinstance(result, dict):
        raise TypeError(f"a handler must return a result model or a dict, not {type(result).__name__}")
    return result


class MethodTable:
    """Method name -> :class:`Method`. See :mod:`mcp_oauth.mcp_server.transport.methods`."""

    def __init__(self) -> None:
        self._methods: dict[str, Method] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._methods

    def __iter__(self):
        return iter(list(self._methods.values()))

    def register(
        self,
        name: str,
        handler: Handler | None = None,
        *,
        eras: Iterable[str] = ALL_ERAS,
        session: bool = True,
        name_param: str | None = None,
        capability: Iterable[str] | None = None,
        cache: CachePolicy | None = None,
        streams: bool = False,
        replace: bool = False,
    ) -> Any:
        """Add ``name``; as a call (``register("x", fn, ...)``) or a decorator (``@register("x", ...)``).

        :raises ValueError: ``name`` is already registered (unless ``replace``), or an unknown era.
        """
        era_set = frozenset(eras)
        if not era_set or not era_set <= ALL_ERAS:
            raise ValueError(f"eras must be a non-empty subset of {sorted(ALL_ERAS)}")

        def add(fn: Handler) -> Handler:
            if name in self._methods and not replace:
                raise ValueError(f"method {name!r} is already registered")
            self._methods[name] = Method(
                name=name,
                handler=fn,
                eras=era_set,
                session=session,
                name_param=name_param,
                capability=tuple(capability) if capability is not None else None,
                cache=cache,
                streams=streams,
            )
            return fn

        if handler is not None:
            return add(handler)
        return add

    def unregister(self, name: str) -> Method:
        """Remove and return the entry of ``name``. :raises KeyError: no such method."""
        return self._methods.pop(name)

    def get(self, name: str, era: str | None = None) -> Method | None:
        """The entry of ``name`` (in ``era`` when given), or None."""
        entry = self._methods.get(name) if isinstance(name, str) else None
        if entry is None or (era is not None and era not in entry.eras):
            return None
        return entry

    def finish(self, entry: Method, call: Call, result: Any) -> dict[str, Any]:
        """The wire ``result`` of ``entry`` for ``call``'s version: modern results get ``resultType``
        (``complete`` unless set), ``ttlMs``/``cacheScope`` (cacheable methods) and
        ``_meta["io.modelcontextprotocol/serverInfo"]``; then validated and shaped by
        ``mcp_types`` for the version when it knows the method."""
        data = _dump(result)
        if isinstance(result, BaseModel) and ("ttlMs" in data or "cacheScope" in data):
            # model defaults (ttl_ms=0, ...) are not the handler's choice
            fields = type(result).model_fields
            explicit = {fields[name].alias or name for name in result.model_fields_set if name in fields}
            for key in ("ttlMs", "cacheScope"):
                if key not in explicit:
                    data.pop(key, None)
        if call.era == MODERN:
            data.setdefault("resultType", "complete")
            if entry.cache is not None and data["resultType"] == "complete":
                for key, value in entry.cache.fields().items():
                    data.setdefault(key, value)
            meta = dict(data.get("_meta") or {})
            meta.setdefault(types.SERVER_INFO_META_KEY, server_info())
            data["_meta"] = meta
        if data.get("resultType") == "task":  # CreateTaskResult (the Tasks extension): no core schema
            return data
        if (call.method, call.protocol_version) in mcp_methods.SERVER_RESULTS:
            shaped = mcp_methods.serialize_server_result(call.method, call.protocol_version, data)
            extensions = (data.get("capabilities") or {}).get("extensions") if call.method == "initialize" else None
            if extensions:  # the extensions framework (SEP-2133) is offered in both eras; 2025 schemas predate it
                shaped["capabilities"]["extensions"] = extensions
            return shaped
        return data

    async def serve(self, entry: Method, call: Call) -> tuple[dict[str, Any], int]:
        """Run ``entry`` for ``call``: the JSON-RPC response message (result or error) and its
        HTTP status (:func:`http_status`).

        Params holding text no database stores (a NUL, a lone surrogate) are refused here for
        every method: -32602 naming the field.

        :raises InsufficientScope: from the handler (the front end answers 403).
        """
        watchers = observers.installed()
        if not watchers:
            return await self._serve(entry, call)
        started_at, began = time.time(), time.perf_counter()
        tokens = [_start(observer, call) for observer in watchers]
        try:
            message, status = await self._serve(entry, call)
        except InsufficientScope:
            _finish(watchers, tokens, entry, call, began, started_at, None, 403)
            raise
        _finish(watchers, tokens, entry, call, began, started_at, message, status)
        return message, status

    async def _serve(self, entry: Method, call: Call) -> tuple[dict[str, Any], int]:
        location = unstorable_field(call.params)
        if location is not None:
            exc = _unstorable_params(call.method, location)
            return error_message(call.message_id, exc), http_status(call.era, exc)
        try:
            result = await entry.handler(call)
        except McpError as exc:
            return error_message(call.message_id, exc), http_status(call.era, exc)
        try:
            return result_message(call.message_id, self.finish(entry, call, result)), 200
        except (ValidationError, TypeError):
            logger.exception("handler of %r returned an invalid result", call.method)
            error = McpError(INTERNAL_ERROR, "The server produced an invalid result")
            return error_message(call.message_id, error), 200


def _start(observer: observers.Observer, call: Call) -> Any:
    try:
        return observer.start(call)
    except Exception:
        logger.exception("MCP observer %r failed to start", observer)
        return None


def _finish(
    watchers: tuple[observers.Observer, ...],
    tokens: list[Any],
    entry: Method,
    call: Call,
    began: float,
    started_at: float,
    message: dict[str, Any] | None,
    status: int,
) -> None:
    outcome: observers.Outcome
    error_code = None
    if message is None:
        outcome = "denied"
    elif "error" in message:
        outcome = "error"
        code = (message["error"] or {}).get("code") if isinstance(message["error"], dict) else None
        error_code = code if isinstance(code, int) else None
    else:
        result = message.get("result")
        result = result if isinstance(result, dict) else {}
        if result.get("isError") is True:
            outcome = "tool_error"
        elif result.get("resultType") == "input_required":
            outcome = "input_required"
        else:
            outcome = "ok"
    target = call.params.get(entry.name_param) if entry.name_param else None
    event = observers.McpRequestEvent(
        call=call,
        target=target if isinstance(target, str) else None,
        outcome=outcome,
        error_code=error_code,
        duration=time.perf_counter() - began,
        started_at=started_at,
        message=message,
        status=status,
    )
    for observer, token in zip(watchers, tokens, strict=True):
        try:
            observer.finish(token, event)
        except Exception:
            logger.exception("MCP observer %r failed to finish", observer)
