"""JSON-RPC method handlers of the MCP endpoint (MCP 2025-11-25 "Lifecycle", "Tools", "Utilities").

====================  =====================================================
method                result
====================  =====================================================
``initialize``        ``InitializeResult``; opens a session (Lifecycle)
``ping``              ``{}`` (Utilities / Ping)
``tools/list``        ``ListToolsResult`` with every tool of the registry
``tools/call``        ``CallToolResult`` (tool errors: ``isError: true``)
``logging/setLevel``  ``{}``; later ``notifications/message`` below it are not sent
====================  =====================================================

Params are validated with the ``mcp_types`` models of the negotiated version
(``mcp_types.methods.parse_client_request``); results are built as ``mcp_types``
models and serialised to that version's wire shape
(``mcp_types.methods.serialize_server_result``). Invalid params raise
:class:`~mcp_oauth.transport.jsonrpc.McpError` ``-32602``.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.http import HttpRequest
from mcp_types import methods as mcp_methods
from pydantic import ValidationError

from ..models import McpSession
from ..registry import handlers as registry_handlers
from ..resource_server.authentication import BearerPrincipal
from ..settings import mcp_oauth_settings
from ..signals import mcp_session_started, tool_called
from ..tools import InvalidArguments, Tool, ToolRegistry
from .context import ToolContext
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    REQUEST_CANCELLED,
    McpError,
    error_message,
    is_valid_id,
    result_message,
)
from ..text import storable
from .sessions import create_session, set_log_level

logger = logging.getLogger("mcp_oauth.transport")

#: Protocol revisions served, newest first (MCP 2025-11-25 "Lifecycle" / "Version Negotiation").
SUPPORTED_PROTOCOL_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0]
#: Assumed when a request has no ``MCP-Protocol-Version`` header and nothing else tells
#: (MCP 2025-11-25 "Transports" / "Protocol Version Header").
DEFAULT_PROTOCOL_VERSION = "2025-03-26"

#: Methods that exist on this server; anything else is -32601 before any other check.
METHODS: frozenset[str] = frozenset(
    {"initialize", "ping", "tools/list", "tools/call", "logging/setLevel", *registry_handlers.HANDLERS}
)

#: Tools running in this process: ``(session id, request id) -> (loop, task)``, for
#: ``notifications/cancelled`` and session termination.
running_requests: dict[tuple[str, Any], tuple[asyncio.AbstractEventLoop, asyncio.Task]] = {}


@dataclass
class Call:
    """One POSTed request being served."""

    request: HttpRequest
    principal: BearerPrincipal
    registry: ToolRegistry
    message_id: int | str
    params: dict[str, Any]
    session: McpSession | None = None
    protocol_version: str = DEFAULT_PROTOCOL_VERSION


class ScopeRequired(Exception):
    """The token lacks scopes the tool needs; the endpoint answers 403 ``insufficient_scope``."""

    def __init__(self, tool: Tool, missing: list[str]) -> None:
        super().__init__(f"tool {tool.name!r} needs the scopes: {' '.join(missing)}")
        self.tool = tool
        self.missing = missing


def server_version() -> str:
    if mcp_oauth_settings.SERVER_VERSION:
        return str(mcp_oauth_settings.SERVER_VERSION)
    try:
        return metadata.version("django-mcp-authz")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


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


def parse_params(method: str, version: str, params: dict[str, Any]) -> Any:
    """The ``mcp_types`` request model of ``method`` validated for ``version``; return its ``params``.

    :raises McpError: -32602 when the params do not validate.
    """
    try:
        request = mcp_methods.parse_client_request(method, version, params)
    except ValidationError as exc:
        raise _invalid_params(method, exc) from None
    return request.params


def serialize(method: str, version: str, result: types.Result) -> dict[str, Any]:
    """``result`` in ``version``'s wire shape (fields the version lacks are dropped)."""
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return mcp_methods.serialize_server_result(method, version, dumped)


# --- handlers ---------------------------------------------------------------------------


async def initialize(call: Call) -> tuple[dict[str, Any], McpSession]:
    """``initialize``: negotiate the version, store the client's capabilities and info on a new session.

    The client's ``protocolVersion`` is kept when supported, else the latest supported
    one is offered (the client disconnects if it cannot speak it).
    """
    params: types.InitializeRequestParams = parse_params("initialize", LATEST_PROTOCOL_VERSION, call.params)
    requested = params.protocol_version
    version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
    capabilities = call.params.get("capabilities") or {}
    client_info = call.params.get("clientInfo") or {}
    if not (storable(capabilities) and storable(client_info)):
        raise McpError(INVALID_PARAMS, "Invalid params for initialize: capabilities or clientInfo hold invalid text")
    session = await sync_to_async(create_session)(
        call.principal, protocol_version=version, client_capabilities=capabilities, client_info=client_info
    )
    await mcp_session_started.asend(sender=McpSession, session=session)
    result = types.InitializeResult(
        protocol_version=version,
        capabilities=types.ServerCapabilities(
            tools=types.ToolsCapability(list_changed=False),
            logging=types.LoggingCapability(),
            **registry_handlers.server_capabilities(),
        ),
        server_info=types.Implementation(name=str(mcp_oauth_settings.SERVER_NAME), version=server_version()),
        instructions=mcp_oauth_settings.INSTRUCTIONS or None,
    )
    return serialize("initialize", version, result), session


async def ping(call: Call) -> dict[str, Any]:
    """``ping``: ``{}``."""
    parse_params("ping", call.protocol_version, call.params)
    return {}


async def set_level(call: Call) -> dict[str, Any]:
    """``logging/setLevel``: remember the minimum level for this session's ``notifications/message``."""
    params: types.SetLevelRequestParams = parse_params("logging/setLevel", call.protocol_version, call.params)
    assert call.session is not None
    await sync_to_async(set_log_level)(call.session, params.level)
    return {}


async def list_tools(call: Call) -> dict[str, Any]:
    """``tools/list``: every tool, in one page (a ``cursor`` we never issued is -32602)."""
    params = parse_params("tools/list", call.protocol_version, call.params)
    if params is not None and params.cursor is not None:
        raise McpError(INVALID_PARAMS, "Invalid params for tools/list: unknown cursor")
    result = types.ListToolsResult(tools=[tool.definition() for tool in call.registry.list()])
    return serialize("tools/list", call.protocol_version, result)


@dataclass
class PreparedToolCall:
    tool: Tool
    arguments: dict[str, Any]
    progress_token: int | str | None


def prepare_tool_call(call: Call) -> PreparedToolCall:
    """Validate a ``tools/call`` before running anything.

    :raises McpError: -32602 for bad params, an unknown tool or invalid arguments
        (``data.errors`` lists the bad fields).
    :raises ScopeRequired: the token lacks scopes the tool needs.
    """
    params: types.CallToolRequestParams = parse_params("tools/call", call.protocol_version, call.params)
    tool = call.registry.get(params.name)
    if tool is None:
        raise McpError(INVALID_PARAMS, f"Unknown tool: {params.name[:200]}")
    missing = [scope for scope in tool.scopes if scope not in call.principal.scopes]
    if missing:
        raise ScopeRequired(tool, missing)
    try:
        arguments = tool.validate_arguments(params.arguments)
    except InvalidArguments as exc:
        raise McpError(INVALID_PARAMS, str(exc), {"errors": exc.errors}) from None
    meta = call.params.get("_meta")
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if isinstance(token, bool) or not isinstance(token, (int, str)):
        token = None
    return PreparedToolCall(tool=tool, arguments=arguments, progress_token=token)


async def run_tool_call(call: Call, prepared: PreparedToolCall, sink=None) -> dict[str, Any] | None:
    """Run the tool and return the JSON-RPC response message (result, or error for an :class:`McpError`).

    Returns None when the call was cancelled by ``notifications/cancelled`` while
    streaming (no response is sent then, MCP "Cancellation").
    """
    assert call.session is not None
    ctx = ToolContext(
        principal=call.principal,
        session=call.session,
        request=call.request,
        request_id=call.message_id,
        protocol_version=call.protocol_version,
        tool_name=prepared.tool.name,
        progress_token=prepared.progress_token,
        sink=sink,
    )
    key = (call.session.pk, call.message_id)
    task = asyncio.current_task()
    if task is not None:
        running_requests[key] = (asyncio.get_running_loop(), task)
    try:
        result = await prepared.tool.call(ctx, prepared.arguments)
    except McpError as exc:
        await _send_tool_called(prepared.tool, call.principal, is_error=True)
        return error_message(call.message_id, exc)
    except asyncio.CancelledError:
        if sink is not None:
            raise
        return error_message(call.message_id, McpError(REQUEST_CANCELLED, "Request cancelled"))
    finally:
        if running_requests.get(key, (None, None))[1] is task:
            running_requests.pop(key, None)
    await _send_tool_called(prepared.tool, call.principal, is_error=result.is_error)
    try:
        return result_message(call.message_id, serialize("tools/call", call.protocol_version, result))
    except ValidationError:
        logger.exception("tool %r returned an invalid CallToolResult", prepared.tool.name)
        return error_message(call.message_id, McpError(INTERNAL_ERROR, "The tool returned an invalid result"))


async def _send_tool_called(tool: Tool, principal: BearerPrincipal, *, is_error: bool) -> None:
    responses = await tool_called.asend_robust(sender=Tool, tool=tool, principal=principal, is_error=is_error)
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("tool_called receiver %r failed", receiver, exc_info=response)


def cancel_request(session_id: str, request_id: Any) -> bool:
    """Cancel the tool running for ``request_id`` of ``session_id`` in this process (if any)."""
    if not is_valid_id(request_id):
        return False
    entry = running_requests.get((session_id, request_id))
    if entry is None:
        return False
    loop, task = entry
    loop.call_soon_threadsafe(task.cancel)
    return True


def cancel_session_requests(session_id: str) -> int:
    """Cancel every tool running in this process for ``session_id`` (the session was deleted)."""
    keys = [key for key in running_requests if key[0] == session_id]
    return sum(cancel_request(*key) for key in keys)


HANDLERS = {
    "ping": ping,
    "tools/list": list_tools,
    "logging/setLevel": set_level,
}

#: Resources, prompts and completion (mcp_oauth.registry): ``fn(RequestContext, params) -> result``.
REGISTRY_HANDLERS = registry_handlers.HANDLERS

assert set(HANDLERS) | set(REGISTRY_HANDLERS) | {"initialize", "tools/call"} == METHODS
