"""Demo tools of the reference site (autodiscovered: every installed app's ``mcp_tools`` module)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from mcp_oauth.tools import ToolContext, ToolError, tool


@tool(scopes=["mcp"], title="Who am I?")
def whoami(ctx: ToolContext) -> dict:
    """Return the authenticated user, the OAuth client and the scopes granted to its token."""
    return {
        "user": ctx.user.get_username() if ctx.user is not None else None,
        "client_id": ctx.client_id,
        "client_name": ctx.application.name if ctx.application is not None else None,
        "scopes": sorted(ctx.scopes),
        "resource": ctx.resource.uri,
    }


@tool(scopes=["mcp"], title="Echo")
async def echo(ctx: ToolContext, text: str, times: Annotated[int, Field(ge=1, le=10)] = 1) -> str:
    """Repeat ``text`` ``times`` times (1-10), separated by spaces."""
    if not text.strip():
        raise ToolError("text must not be empty")
    return " ".join([text] * times)
