"""Streamable HTTP transport (MCP 2025-11-25 "Transports"): endpoint, JSON-RPC dispatch, sessions.

* :mod:`.views` — the endpoint (:class:`~.views.McpView`, ``mcp_endpoint``)
* :mod:`.jsonrpc` — message parsing, error codes, :class:`~.jsonrpc.McpError`
* :mod:`.dispatch` — method handlers (initialize, ping, tools/list, tools/call, logging/setLevel)
* :mod:`.sessions` — sessions in the database and their outbox (:func:`~.sessions.enqueue_session_message`)
* :mod:`.sse` — SSE streams (per-request and the session's GET stream)
* :mod:`.context` — :class:`~.context.ToolContext`

``from mcp_oauth.transport import enqueue_session_message`` works too (imported lazily,
so importing this package does not load models).
"""

from __future__ import annotations

from typing import Any

__all__ = ["enqueue_session_message"]


def __getattr__(name: str) -> Any:
    if name == "enqueue_session_message":
        from .sessions import enqueue_session_message

        return enqueue_session_message
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
