"""A tool in a project package (imported only when ``MCP_OAUTH["TOOL_MODULES"]`` names it)."""

from mcp_oauth.mcp_server.tools import ToolContext, tool


@tool(scopes=["mcp"])
def site_package_whoami(ctx: ToolContext) -> str:
    """The user name this client acts for."""
    return ctx.user.get_username()
