"""A resource in a project package (imported only when ``MCP_OAUTH["RESOURCE_MODULES"]`` names it)."""

from mcp_oauth.mcp_server.registry import RequestContext, resource


@resource("site://hello", name="site_hello", mime_type="text/plain")
def site_hello(ctx: RequestContext) -> str:
    """A greeting for the signed-in user."""
    return f"Hello, {ctx.user.get_username()}"
