"""A prompt in a project package (imported only when ``MCP_OAUTH["PROMPT_MODULES"]`` names it)."""

from mcp_oauth.mcp_server.registry import RequestContext, prompt


@prompt(arguments={"topic": "What to write about"})
def site_haiku(ctx: RequestContext, topic: str) -> str:
    """Ask for a haiku."""
    return f"Write a haiku about {topic}."
