"""``tools/list`` and ``tools/call`` handlers (MCP 2025-11-25 / 2026-07-28 "Server Features / Tools").

Both eras share them. ``tools/call`` checks the tool's scopes (:class:`~.table.InsufficientScope`
-> HTTP 403 step-up), validates the arguments, then runs the tool
with a :class:`~.context.ToolContext`. Arguments that do not match the tool's input schema are a
*tool execution error*, not a protocol error (MCP 2025-11-25 and 2026-07-28 "Server Features /
Tools" § Error Handling, SEP-1303: "Input validation errors" are reported "in tool results with
``isError: true``" so that the model can correct itself and retry): the result is ``isError: true``
with one text block naming every bad field. An unknown tool, or params that are not a
``CallToolRequest``, stay JSON-RPC ``-32602`` (protocol errors). In a 2026-07-28 request a tool helper may raise
:class:`~.input_required.InputRequired`; the result is then ``resultType: "input_required"`` with
a sealed ``requestState`` (:mod:`.request_state`), and the retry's state is verified before the
tool runs again.

The registry is duck-typed (``get(name)``, ``list()``; tools with ``name``, ``scopes``,
``definition()``, ``validate_arguments()``, ``call()``): this module does not import
:mod:`mcp_oauth.mcp_server.tools`, which builds on the transport.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types

from mcp_oauth.mcp_server.transport.context import ToolContext
from mcp_oauth.mcp_server.transport.input_required import InputRequired
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, REQUEST_CANCELLED, McpError, is_valid_id
from mcp_oauth.mcp_server.transport.request_state import input_required_result, open_round
from mcp_oauth.mcp_server.transport.table import Call, InsufficientScope, parse_params
from mcp_oauth.resource_server.organizations import enabled_tool_names
from mcp_oauth.shared import scopes as scope_hierarchy
from mcp_oauth.signals import tool_called

__all__ = ["call_tool", "cancel_request", "cancel_session_requests", "find_tool", "list_tools", "running_requests"]

logger = logging.getLogger("mcp_oauth.transport")

#: Legacy tools running in this process: ``(session id, request id) -> (loop, task)``, for
#: ``notifications/cancelled`` and session termination.
running_requests: dict[tuple[str, Any], tuple[asyncio.AbstractEventLoop, asyncio.Task]] = {}

#: ``async defer_to_task(call, tool, ctx, arguments) -> CreateTaskResult dict | None``, installed
#: by :mod:`mcp_oauth.mcp_server.mcp_tasks`: a result answers the call (the tool runs as a task), None runs
#: the tool here.
defer_to_task: Callable[[Call, Any, ToolContext, dict[str, Any]], Awaitable[dict[str, Any] | None]] | None = None


async def list_tools(call: Call) -> types.ListToolsResult:
    """``tools/list``: every tool, in one page, in registration order (a ``cursor`` we never issued
    is -32602); for a request acting for an organization with ``enabled_tools``, only those. Each
    tool decides what this client sees (``Tool.listed_definition``: the MCP Apps ``_meta.ui`` only
    for a client that declared that extension)."""
    params = parse_params(call)
    if params is not None and params.cursor is not None:
        raise McpError(INVALID_PARAMS, "Invalid params for tools/list: unknown cursor")
    enabled = enabled_tool_names(getattr(call.principal, "organization", None))
    return types.ListToolsResult(
        tools=[
            definition
            for tool in call.registry.list()
            if (enabled is None or tool.name in enabled)
            and (definition := tool.listed_definition(call.client_capabilities)) is not None
        ]
    )


def find_tool(call: Call, name: str) -> Any:
    """The tool ``name`` of ``call``'s registry, or None when unknown or not among the
    ``enabled_tools`` of the organization the request acts for (answered alike)."""
    tool = call.registry.get(name)
    if tool is None:
        return None
    enabled = enabled_tool_names(getattr(call.principal, "organization", None))
    return tool if enabled is None or tool.name in enabled else None


def _progress_token(call: Call) -> int | str | None:
    token = call.meta.get("progressToken")
    if isinstance(token, bool) or not isinstance(token, (int, str)):
        return None
    return token


async def call_tool(call: Call) -> Any:
    """``tools/call``: a ``CallToolResult`` (tool failures: ``isError: true``), or in 2026-07-28 an
    ``InputRequiredResult``.

    Arguments that fail the tool's input schema answer ``isError: true`` with a text block naming
    each bad field (a tool execution error, MCP "Tools" § Error Handling).

    :raises McpError: -32602 for params that are not a ``CallToolRequest``, an unknown tool, or (2026-07-28) an invalid, expired, replayed or foreign ``requestState``; any
        :class:`McpError` the tool raises.
    :raises InsufficientScope: the token lacks scopes the tool needs.
    """
    params = parse_params(call)
    tool = find_tool(call, params.name)
    if tool is None:
        raise McpError(INVALID_PARAMS, f"Unknown tool: {params.name[:200]}")
    lacking = scope_hierarchy.missing(call.principal.scopes, tool.scopes)
    if lacking:
        # One challenge naming every scope the call needs, whatever the token holds (MCP 2026-07-28
        # "Scope challenge handling"); SCOPE_HIERARCHY and offline_access are applied by the challenge.
        raise InsufficientScope(f"The tool {tool.name}", lacking, [*call.principal.resource.scope_list, *tool.scopes])
    try:
        arguments = tool.validate_arguments(params.arguments)
    except ValueError as exc:  # InvalidArguments: a tool execution error the model can correct
        return invalid_arguments_result(exc)  # the tool did not run: no tool_called signal

    input_round, binding = open_round(call, tool.name, params.arguments or {}) if call.modern else (None, {})

    ctx = ToolContext(
        principal=call.principal,
        session=call.session,
        request=call.http_request,
        request_id=call.message_id,
        protocol_version=call.protocol_version,
        tool_name=tool.name,
        progress_token=_progress_token(call),
        sink=call.sink,
        era=call.era,
        declared_capabilities=call.client_capabilities if call.modern else None,
        meta_log_level=call.log_level if call.modern else None,
        arguments=dict(arguments),
        input_round=input_round,
    )
    call.open_stream()
    key = (call.session.pk, call.message_id) if call.session is not None else None
    task = asyncio.current_task()
    if key is not None and task is not None:
        running_requests[key] = (asyncio.get_running_loop(), task)
    try:
        deferred = await defer_to_task(call, tool, ctx, dict(arguments)) if defer_to_task is not None else None
        if deferred is not None:
            return deferred
        result = await tool.call(ctx, arguments)
    except InputRequired as needed:
        assert input_round is not None
        return input_required_result(binding, needed, input_round)
    except McpError:
        await _send_tool_called(tool, call.principal, is_error=True)
        raise
    except asyncio.CancelledError:
        if call.sink is not None or call.modern:
            raise
        raise McpError(REQUEST_CANCELLED, "Request cancelled") from None
    finally:
        if key is not None and running_requests.get(key, (None, None))[1] is task:
            running_requests.pop(key, None)
    await _send_tool_called(tool, call.principal, is_error=bool(result.is_error))
    return result


def invalid_arguments_result(exc: ValueError) -> types.CallToolResult:
    """The ``CallToolResult`` of arguments that fail the input schema: ``isError: true`` and one
    text block, ``Invalid arguments for tool 'name': field: message; …`` (MCP 2025-11-25 "Tools"
    § Error Handling: input validation errors are tool execution errors)."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(exc))], is_error=True)


async def _send_tool_called(tool: Any, principal: Any, *, is_error: bool) -> None:
    responses = await tool_called.asend_robust(sender=type(tool), tool=tool, principal=principal, is_error=is_error)
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
