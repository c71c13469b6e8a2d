"""The MCP server: the transport core (:mod:`mcp_oauth.mcp_server.transport`), then the features on
top of it, tools (:mod:`~mcp_oauth.mcp_server.tools`), resources and prompts
(:mod:`~mcp_oauth.mcp_server.registry`) and Tasks (:mod:`~mcp_oauth.mcp_server.mcp_tasks`),
composed onto the method table by :mod:`mcp_oauth.mcp_server.features`; draining on SIGTERM
(:mod:`~mcp_oauth.mcp_server.transport.drain`). Imports ``shared``, ``models``, ``dpop`` and
``resource_server``, never ``authorization_server``."""
