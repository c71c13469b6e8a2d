"""From a parsed JSON-RPC request to ``(Method, Call)``: era selection and every check before the
handler runs, without any HTTP framework (MCP 2025-11-25 and 2026-07-28 "Transports").

A front end (the Django view, an ASGI lane) authenticates, parses the body
(:func:`~.jsonrpc.parse_message`), then::

    entry, call = await route_request(incoming, headers, principal, registry, http_request=request)
    message, status = await methods.serve(entry, call)      # or stream it (entry.streams)

``headers`` is a case-insensitive mapping of the request headers (Django's ``request.headers``).
Every refusal is a :class:`~.jsonrpc.JsonRpcError` carrying its HTTP status (see the table in
:mod:`.views`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_oauth.mcp_server.transport import modern
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_REQUEST, METHOD_NOT_FOUND, Incoming, JsonRpcError
from mcp_oauth.mcp_server.transport.legacy import LATEST_HANDSHAKE_VERSION
from mcp_oauth.mcp_server.transport.methods import methods
from mcp_oauth.mcp_server.transport.sessions import afind_session
from mcp_oauth.mcp_server.transport.table import HANDSHAKE_VERSIONS, LEGACY, MODERN, MODERN_VERSIONS, Call, Method
from mcp_oauth.models import McpSession
from mcp_oauth.resource_server.authentication import BearerPrincipal
from mcp_oauth.resource_server.organizations import enabled_tool_names

__all__ = [
    "SESSION_HEADER",
    "VERSION_HEADER",
    "check_protocol_version",
    "is_modern_header",
    "require_session",
    "route_request",
]

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


def check_protocol_version(headers: Mapping[str, str], request_id: Any = None) -> str | None:
    """The ``MCP-Protocol-Version`` header of a 2025-11-25-family request, when present.

    :raises JsonRpcError: -32022 (HTTP 400) for a version this server does not speak
        (MCP 2025-11-25 "Protocol Version Header": "MUST respond with 400 Bad Request");
        ``data`` is ``{"supported": [...], "requested": "..."}``.
    """
    value = modern.field_value(headers.get(VERSION_HEADER))
    if value is None:
        return None
    if value not in HANDSHAKE_VERSIONS:
        raise modern.unsupported_version(value, request_id)
    return value


def is_modern_header(headers: Mapping[str, str]) -> bool:
    """Whether ``MCP-Protocol-Version`` names a 2026-07-28-era revision."""
    return modern.field_value(headers.get(VERSION_HEADER)) in MODERN_VERSIONS


async def require_session(
    headers: Mapping[str, str],
    principal: BearerPrincipal,
    request_id: Any = None,
    prefetched: dict[str, Any] | None = None,
    *,
    cached: bool = True,
) -> McpSession:
    """The live session named by ``Mcp-Session-Id`` and owned by ``principal``.

    :raises JsonRpcError: 400 without the header; 404 for any id that is not a live
        session of this user, client and resource (one answer for all cases).
    """
    session_id = headers.get(SESSION_HEADER)
    if not session_id or not session_id.strip():
        raise JsonRpcError(
            INVALID_REQUEST, f"Bad Request: {SESSION_HEADER} header is required", http_status=400, request_id=request_id
        )
    session = await afind_session(session_id.strip(), principal, prefetched, cached=cached)
    if session is None:
        raise JsonRpcError(
            INVALID_REQUEST, "Not Found: unknown or terminated session", http_status=404, request_id=request_id
        )
    return session


async def route_request(
    incoming: Incoming,
    headers: Mapping[str, str],
    principal: BearerPrincipal,
    registry: Any,
    *,
    http_request: Any = None,
    prefetched: dict[str, Any] | None = None,
) -> tuple[Method, Call]:
    """The table entry and the :class:`~.table.Call` of a JSON-RPC request, in its era.

    2026-07-28 (:func:`~.modern.is_modern`): the :mod:`.modern` ladder, the method in that era
    (404 -32601), the client capability it needs (-32021). 2025-11-25 family: the method in that
    era (200 -32601), the version header (-32022), the session (400/404) unless it is ``initialize``.

    :param prefetched: cache entries the front end already read (the session's, see
        :func:`~.sessions.afind_session`).

    :raises JsonRpcError: the first failing check, with its HTTP status; -32600 (HTTP 400) for a
        message without an ``id`` (a notification is not a request).
    """
    message_id = incoming.id
    if message_id is None:  # parse_message gives every request an id
        raise JsonRpcError(INVALID_REQUEST, "Invalid Request: a request needs an id", http_status=400)
    method = incoming.method or ""
    if modern.is_modern(method, incoming.params, headers.get(VERSION_HEADER)):
        known = methods.get(method)
        name_param = known.name_param if known is not None else None
        envelope = modern.check_envelope(method, incoming.params, headers, message_id, name_param)
        entry = methods.get(method, MODERN)
        if entry is None:
            raise JsonRpcError(
                METHOD_NOT_FOUND, f"Method not found: {method[:100]}", http_status=404, request_id=message_id
            )
        modern.check_capability(entry, envelope, message_id)
        if method == "tools/call":
            tool = registry.get(incoming.params.get("name")) if isinstance(incoming.params.get("name"), str) else None
            enabled = enabled_tool_names(getattr(principal, "organization", None))
            if tool is not None and (enabled is None or tool.name in enabled):  # a disabled tool: as unknown
                modern.check_param_headers(tool.input_schema, incoming.params.get("arguments"), headers, message_id)
        return entry, Call(
            method=method,
            message_id=message_id,
            params=incoming.params,
            principal=principal,
            registry=registry,
            era=MODERN,
            protocol_version=envelope.protocol_version,
            client_capabilities=envelope.client_capabilities,
            client_info=envelope.client_info,
            log_level=envelope.log_level,
            http_request=http_request,
        )
    entry = methods.get(method, LEGACY)
    if entry is None:
        raise JsonRpcError(
            METHOD_NOT_FOUND, f"Method not found: {method[:100]}", http_status=200, request_id=message_id
        )
    check_protocol_version(headers, message_id)
    session = await require_session(headers, principal, message_id, prefetched) if entry.session else None
    return entry, Call(
        method=method,
        message_id=message_id,
        params=incoming.params,
        principal=principal,
        registry=registry,
        era=LEGACY,
        protocol_version=session.protocol_version if session is not None else LATEST_HANDSHAKE_VERSION,
        session=session,
        client_capabilities=dict(session.client_capabilities or {}) if session is not None else {},
        client_info=dict(session.client_info or {}) if session is not None else {},
        log_level=session.log_level if session is not None else None,
        http_request=http_request,
    )
