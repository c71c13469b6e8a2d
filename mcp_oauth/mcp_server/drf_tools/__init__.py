"""Django REST framework views published as MCP tools (``ToolRegistry.drf_viewset`` / ``drf_view``).

* :mod:`.schema` — a serializer's JSON Schemas (input and output) and a view's query parameters;
* :mod:`.invoke` — the view run in-process for a tool call, as the token's user; its response as a
  ``CallToolResult``;
* :mod:`.publish` — one tool definition per action.

See ``docs/how-to/drf-tools.md``.
"""

from mcp_oauth.mcp_server.drf_tools.invoke import ToolPrincipalAuthentication
from mcp_oauth.mcp_server.drf_tools.publish import DrfTool, annotations_for, view_tool, viewset_tools

__all__ = ["DrfTool", "ToolPrincipalAuthentication", "annotations_for", "view_tool", "viewset_tools"]
