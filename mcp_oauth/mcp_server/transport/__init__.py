"""Streamable HTTP transport, both protocol eras (MCP 2025-11-25 sessions, 2026-07-28 stateless requests).

* :mod:`.views` — the Django endpoint (:class:`~.views.McpView`, ``mcp_endpoint``): HTTP only
* :mod:`.methods` — the one method -> handler table (:data:`~.methods.methods`) with the core's methods;
  :mod:`mcp_oauth.mcp_server.features` adds tools, resources, prompts, completion and tasks
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
* :mod:`.capabilities` — the server capabilities announced (features add theirs through :mod:`mcp_oauth.mcp_server.features`)

Dependency direction: the transport core imports no feature. :mod:`mcp_oauth.mcp_server.tools`,
:mod:`mcp_oauth.mcp_server.registry` and :mod:`mcp_oauth.mcp_server.mcp_tasks` build on it; nothing in this package
imports them (the tool registry is handed to the view and reaches handlers as ``call.registry``;
the rest is registered by :mod:`mcp_oauth.mcp_server.features`).

The package itself imports nothing: ``mcp_oauth.mcp_server.transport.asgi`` is imported by a site's
``asgi.py`` before Django's app loading. Queue a message to a session with
:func:`mcp_oauth.mcp_server.transport.sessions.enqueue_session_message`.
"""
