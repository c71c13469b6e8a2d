"""Streamable HTTP transport, both protocol eras (MCP 2025-11-25 sessions, 2026-07-28 stateless requests).

* :mod:`.views` — the Django endpoint (:class:`~.views.McpView`, ``mcp_endpoint``): HTTP only
* :mod:`.handlers` — the one method -> handler table (:data:`~.handlers.methods`) and its registration API
* :mod:`.routing` — era selection and every check before a handler runs (HTTP-framework free)
* :mod:`.table` — :class:`~.table.Call`, :class:`~.table.Method`, :class:`~.table.MethodTable`, versions
* :mod:`.legacy` — ``initialize``, ``ping``, ``logging/setLevel`` (2025-11-25 family)
* :mod:`.modern` — the 2026-07-28 ``_meta`` envelope ladder, ``server/discover``, ``subscriptions/listen``
* :mod:`.tool_methods` — ``tools/list``, ``tools/call`` (both eras; ``input_required`` in 2026-07-28)
* :mod:`.input_required` / :mod:`.request_state` — multi-round-trip requests and the sealed ``requestState``
* :mod:`.subscriptions` — server events for listen streams (:func:`~.subscriptions.publish_list_changed`)
* :mod:`.jsonrpc` — message parsing, error codes, :class:`~.jsonrpc.McpError`
* :mod:`.sessions` — sessions in the database and their outbox (:func:`~.sessions.enqueue_session_message`)
* :mod:`.sse` — SSE streams (per-request and the session's GET stream)
* :mod:`.context` — :class:`~.context.ToolContext`

Dependency direction: :mod:`mcp_oauth.tools` builds on :mod:`.context`, :mod:`.jsonrpc` and
:mod:`.input_required`; nothing in this package imports :mod:`mcp_oauth.tools` (the registry
is handed to the view and reaches handlers as ``call.registry``).

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
