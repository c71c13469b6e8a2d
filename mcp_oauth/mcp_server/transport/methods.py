"""The one method -> handler table of the MCP endpoint, for both protocol eras: the transport core.

This module registers the core's own methods (lifecycle, ``server/discover``,
``subscriptions/listen``); the features on top of it (tools, resources, prompts, completion, the
Tasks extension) are added by the composition module :mod:`mcp_oauth.mcp_server.features`
(:func:`~mcp_oauth.mcp_server.features.install`, run by ``MCPOAuthConfig.ready``). Nothing in the transport
imports a feature.

Every JSON-RPC request the endpoint serves is routed here and only here: the front ends
(:mod:`.views` for Django, an ASGI lane) parse the HTTP request, authenticate it, pick the era,
build a :class:`~.table.Call`, look the method up with ``methods.get(name, era)`` and run
``await methods.serve(entry, call)``, then render the JSON-RPC message as JSON or SSE.

Adding a method is one registration line::

    from mcp_oauth.mcp_server.transport.methods import methods
    from mcp_oauth.mcp_server.transport.table import PRIVATE, Call, parse_params

    async def list_prompts(call: Call) -> types.ListPromptsResult:   # or a wire-shaped dict
        params = parse_params(call)                                  # -32602 when invalid
        ...

    methods.register("prompts/list", list_prompts, cache=PRIVATE)

``register(name, handler, *, eras, session, name_param, capability, cache, streams)``:

============  ==========================================================================
eras          ``{LEGACY, MODERN}`` (default both); elsewhere the method is -32601
              (legacy: HTTP 200; modern: HTTP 404)
session       legacy only: the caller must send its ``Mcp-Session-Id`` (default True;
              False for ``initialize``); modern requests never have a session
name_param    the params key mirrored in the ``Mcp-Name`` header (modern -32020 on a
              mismatch): ``"name"`` for ``tools/call``/``prompts/get``, ``"uri"`` for
              ``resources/read``
capability    a client capability path the method needs, e.g. ``("sampling",)``; modern:
              -32021 (HTTP 400) with ``data.requiredCapabilities`` when ``_meta`` lacks it
cache         list/read results: :data:`~.table.PRIVATE` (depends on the user or token) or
              :data:`~.table.PUBLIC`; the modern era adds ``ttlMs`` and ``cacheScope``
streams       the handler may send notifications (``call.sink``) on its own response
              stream; the front end then offers SSE (legacy ``tools/call`` always streams
              under ASGI; modern responses commit to SSE at the first notification)
============  ==========================================================================

A handler is ``async def handler(call: Call)`` returning an ``mcp_types`` result model or a
wire-shaped dict; the table adds ``resultType``, ``ttlMs``/``cacheScope`` and
``_meta["io.modelcontextprotocol/serverInfo"]`` in the modern era and validates the result with
``mcp_types`` for the call's version. It raises :class:`~.jsonrpc.McpError` for a JSON-RPC error
(modern: -32602/-32600/-32700 -> 400, -32601 -> 404) and
:class:`~.table.InsufficientScope` for a 403 step-up challenge. It must not need the HTTP
request (``call.http_request`` is only handed on to tools).

Legacy ``notifications/*`` and responses are not methods: the front end handles them
(``notifications/cancelled`` -> :func:`~.tool_methods.cancel_request`).
"""

from __future__ import annotations

from mcp_oauth.mcp_server.transport import legacy, modern
from mcp_oauth.mcp_server.transport.table import LEGACY, MODERN, PUBLIC, MethodTable

__all__ = ["methods"]

#: The endpoint's table.
methods = MethodTable()

# --- lifecycle and utilities ---------------------------------------------------------------
methods.register("initialize", legacy.initialize, eras={LEGACY}, session=False)
methods.register("ping", legacy.ping, eras={LEGACY})
methods.register("logging/setLevel", legacy.set_level, eras={LEGACY})
methods.register("server/discover", modern.discover, eras={MODERN}, cache=PUBLIC)
methods.register("subscriptions/listen", modern.listen, eras={MODERN}, streams=True)
