"""Demo prompts of the reference site (autodiscovered: every installed app's ``mcp_prompts`` module)."""

from __future__ import annotations

import mcp_types as types
from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.registry import RequestContext, prompt

from .mcp_resources import _my_notes

STYLES = ("bullet points", "one paragraph", "one sentence", "haiku")


def _note_titles(ctx: RequestContext, value: str) -> list[str]:
    """The user's own note titles starting with ``value`` (case-insensitive)."""
    return list(_my_notes(ctx).filter(title__istartswith=value).order_by("title").values_list("title", flat=True)[:100])


def _styles(ctx: RequestContext, value: str) -> list[str]:
    return [style for style in STYLES if style.startswith(value.lower())]


@prompt(
    title="Summarize a note",
    arguments={"note": "Title of one of your notes", "style": "How to summarize (default: bullet points)"},
    completers={"note": _note_titles, "style": _styles},
)
async def summarize_note(ctx: RequestContext, note: str, style: str = "bullet points") -> list:
    """Ask the model to summarize one of your notes, embedded as a resource."""
    found = await sync_to_async(lambda: _my_notes(ctx).filter(title=note).first())()
    if found is None:
        return f"There is no note titled {note!r}. Ask me to list my notes (resources/list) first."
    return [
        types.PromptMessage(
            role="user",
            content=types.EmbeddedResource(
                resource=types.TextResourceContents(uri=f"notes://{found.pk}", mime_type="text/plain", text=found.body)
            ),
        ),
        f"Summarize the note above as {style}.",
    ]
