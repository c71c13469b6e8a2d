"""Demo tools of the reference site (autodiscovered: every installed app's ``mcp_tools`` module)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from elicitation.api import elicit_form
from elicitation.form import ElicitationSchema
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


#: The form ``ask_name`` shows (checked at import: an invalid form fails start-up).
ASK_NAME_FORM = ElicitationSchema(
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "title": "Your name", "minLength": 1, "maxLength": 100},
            "age": {"type": "integer", "title": "Your age", "minimum": 0, "maximum": 150},
        },
        "required": ["name"],
    }
)


@tool(scopes=["mcp"], title="Ask my name")
async def ask_name(ctx: ToolContext) -> str:
    """Ask the user their name (and optionally age) with a form elicitation, then greet them."""
    answer = await elicit_form(ctx, "What is your name?", ASK_NAME_FORM)
    if answer.action == "decline":
        return "You declined to tell me your name."
    if answer.action == "cancel":
        return "You cancelled the question."
    greeting = f"Hello, {answer.content['name']}!"
    if answer.content.get("age") is not None:
        greeting += f" You are {answer.content['age']}."
    return greeting
