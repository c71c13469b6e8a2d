"""Demo tools of the reference site (autodiscovered: every installed app's ``mcp_tools`` module)."""

from __future__ import annotations

from typing import Annotated

from asgiref.sync import sync_to_async
from pydantic import Field

from elicitation.api import ConnectedAccount, elicit_form, elicit_url, reconnect, require_connection
from elicitation.form import ElicitationSchema
from elicitation.providers import ProviderError, fetch_json
from mcp_oauth.mcp_server.mcp_apps import AppView
from mcp_oauth.mcp_server.tools import TokenExchangeError, ToolContext, ToolError, registry, tool
from mcp_oauth.settings import mcp_oauth_settings

from .api import NoteViewSet
from .apps import API_PATH
from .models import Note


@tool(scopes=["mcp"], title="Who am I?")
def whoami(ctx: ToolContext) -> dict:
    """Return the authenticated user (None and ``machine`` true for a client-credentials token), the
    OAuth client, the scopes granted to its token and the organization the call acts for (its slug)."""
    return {
        "user": ctx.user.get_username() if ctx.user is not None else None,
        "machine": ctx.is_machine,
        "client_id": ctx.client_id,
        "client_name": ctx.application.name if ctx.application is not None else None,
        "scopes": sorted(ctx.scopes),
        "resource": ctx.resource.uri,
        "organization": ctx.organization.slug if ctx.organization is not None else None,
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


async def _profile(account: ConnectedAccount) -> tuple[int, object]:
    """GET the provider's userinfo endpoint with the connection's token: ``(HTTP status, JSON)``."""
    url = account.provider.userinfo_endpoint
    if not url:
        raise ToolError("The demo provider has no profile endpoint configured.")
    try:  # bounded in size and time, no redirects: the provider is a third party
        return await sync_to_async(fetch_json, thread_sensitive=False)(
            "GET", url, headers={"Authorization": account.authorization_header}
        )
    except ProviderError:
        raise ToolError(f"{account.provider.name} could not be reached.") from None


@tool(scopes=["mcp"], title="My demo-provider profile", annotations={"readOnlyHint": True})
async def demo_profile(ctx: ToolContext) -> dict:
    """Read your profile at the demo third-party provider, with the connection this site keeps for you.

    Without a connection the call ends with JSON-RPC error -32042 and a link: open it, connect
    your account there, then call the tool again. (Clients without URL-mode elicitation get a
    tool error naming the site's connections page.) When the provider no longer accepts the
    stored token (you revoked it there), the connection is forgotten and you are asked again.
    """
    account = await require_connection(ctx, "demo", ["profile"])
    status, profile = await _profile(account)
    if status == 401:  # the provider no longer accepts the token (revoked there): connect again
        account = await reconnect(ctx, account)
        status, profile = await _profile(account)
    if status != 200:
        raise ToolError(f"{account.provider.name} refused the request (HTTP {status}).")
    if not isinstance(profile, dict):
        raise ToolError(f"{account.provider.name} did not answer with a JSON object.")
    return {"provider": account.provider.name, "account": account.account_label, "profile": profile}


@tool(scopes=["mcp"], title="My profile from this site's API", annotations={"readOnlyHint": True})
async def my_site_profile(ctx: ToolContext) -> dict:
    """Read your profile from this site's own JSON API (``/api/profile``), on your behalf.

    The call's token is exchanged (RFC 8693) for a ``profile`` token of the API's resource
    ``<site>/api``: a token for another protected resource of this site, speaking for you, naming
    your MCP client as the actor (``act``). Your connection must have granted the ``profile`` scope.
    """
    try:
        token = await ctx.exchange_token(resource=mcp_oauth_settings.absolute(API_PATH), scope="profile")
    except TokenExchangeError as exc:
        if exc.error == "invalid_scope":
            raise ToolError("Connect again granting the profile scope to read your profile.") from None
        raise ToolError(f"This site's API refused the exchange ({exc.error}).") from None
    try:
        status, profile = await sync_to_async(fetch_json, thread_sensitive=False)(
            "GET", mcp_oauth_settings.absolute(API_PATH + "/profile"), headers={"Authorization": token.authorization}
        )
    except ProviderError:
        raise ToolError("This site's API could not be reached.") from None
    if status != 200 or not isinstance(profile, dict):
        raise ToolError(f"This site's API refused the request (HTTP {status}).")
    return {"profile": profile, "token": {"scope": token.scope, "expires_in": token.expires_in}}


@tool(scopes=["mcp"], title="Store my demo API key")
async def set_api_key(ctx: ToolContext) -> str:
    """Store a (demo) API key: you type it on this site's secure page, never in the chat.

    Sends a URL-mode elicitation during the call and waits (up to 10 minutes) until you saved or cancelled.
    """
    result = await elicit_url(
        ctx,
        "Enter your Demo API key on this site's secure page (it never goes through your MCP client).",
        kind="secret",
        secret_name="demo_api_key",
        wait_seconds=600,
    )
    if result.action != "accept":
        return "You did not open the page; nothing was stored."
    if not result.completed:
        return "Nothing was stored (the page was cancelled or not finished in time)."
    return "Your API key is stored, encrypted on the server. It never went through your MCP client."


#: The notes API (``/api/notes/``) as tools: notes_list, notes_create, notes_retrieve,
#: notes_partial_update, notes_destroy; the ViewSet's permissions (owner only) and validation apply.
registry.drf_viewset(
    NoteViewSet, basename="notes", actions=["list", "create", "retrieve", "partial_update", "destroy"], scopes=["mcp"]
)


def _my_notes(ctx) -> list[dict]:
    """The token's user's notes (newest 50, oldest first) as ``{"id", "title", "body"}``."""
    if ctx.user is None:
        return []
    notes = list(Note.objects.filter(owner=ctx.user).order_by("-pk")[:50])
    return [{"id": note.pk, "title": note.title, "body": note.body} for note in reversed(notes)]


#: The notes view (MCP Apps): ``templates/project/notes_app.html`` as ``ui://project/notes_app``,
#: rendered with the token's user's notes; it reaches no origin (no CSP domain declared).
NOTES_VIEW = AppView(
    "project/notes_app.html",
    name="notes_app",
    title="My notes",
    description="Your notes, and a form adding one (an MCP Apps view).",
    context=lambda ctx: {"notes": _my_notes(ctx)},
    prefers_border=True,
    scopes=("mcp",),
)


@tool(scopes=["mcp"], title="My notes", ui=NOTES_VIEW, annotations={"readOnlyHint": True})
def notes_app(ctx: ToolContext) -> dict:
    """List your notes (a host supporting MCP Apps shows them in an interactive view)."""
    if ctx.user is None:
        raise ToolError("Notes belong to users: this token has none.")
    return {"notes": _my_notes(ctx)}


@tool(scopes=["mcp"], title="Add a note", ui=NOTES_VIEW)
def add_note(
    ctx: ToolContext,
    title: Annotated[str, Field(min_length=1, max_length=200)],
    body: Annotated[str, Field(max_length=10_000)] = "",
) -> dict:
    """Add a note with ``title`` and ``body``; return it as ``{"id", "title", "body"}``."""
    if ctx.user is None:
        raise ToolError("Notes belong to users: this token has none.")
    if not title.strip():
        raise ToolError("title must not be empty")
    note = Note.objects.create(owner=ctx.user, title=title.strip(), body=body)
    return {"id": note.pk, "title": note.title, "body": note.body}
