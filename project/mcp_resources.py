"""Demo resources of the reference site (autodiscovered: every installed app's ``mcp_resources`` module).

* ``demo://readme`` — a static Markdown text.
* ``notes://{pk}`` — the signed-in user's own notes as JSON (a :class:`ModelResource`: other users'
  notes are "not found"); listed by ``resources/list``, ``pk`` completes.
* ``notes://{pk}/attachment`` — a note's file, as a binary resource (at most 1 MiB).
"""

from __future__ import annotations

from mcp_oauth.mcp_server.registry import ModelResource, RequestContext, resource
from mcp_oauth.mcp_server.registry.resources import registry

from .models import Note

README = """# django-mcp-authz demo

This server exposes tools, resources and prompts behind OAuth 2.1.

* `notes://{pk}` — your notes (create some in the admin, they appear here).
* Prompt `summarize_note` — pick a note; its `note` argument completes.
"""


@resource(
    "demo://readme",
    name="readme",
    title="About this server",
    mime_type="text/markdown",
    annotations={"audience": ["user", "assistant"], "priority": 0.5},
    size=len(README.encode()),
)
def readme(ctx: RequestContext) -> str:
    """What this demo server offers."""
    return README


def _my_notes(ctx: RequestContext):
    return Note.objects.filter(owner=ctx.user) if ctx.is_authenticated_user else Note.objects.none()


def _note_json(note: Note) -> dict:
    return {
        "id": note.pk,
        "title": note.title,
        "body": note.body,
        "attachment": bool(note.attachment),
        "updated_at": note.updated_at.isoformat(),
    }


notes = registry.add(
    ModelResource(
        "notes://{pk}",
        model=Note,
        queryset=_my_notes,
        serializer=_note_json,
        name="note",
        title=lambda note: note.title,
        description="One of your notes (JSON).",
        mime_type="application/json",
    )
)

note_attachments = registry.add(
    ModelResource(
        "notes://{pk}/attachment",
        model=Note,
        queryset=lambda ctx: _my_notes(ctx).exclude(attachment=""),
        file_field="attachment",
        name="note-attachment",
        description="The file attached to one of your notes.",
        max_bytes=1024 * 1024,
        listed=False,
    )
)
