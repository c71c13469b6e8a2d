"""End to end: the reference site's DRF ``NoteViewSet`` published as tools (``notes_*``), driven by the
official MCP Python SDK client in both protocol eras, and compared with the same API over HTTP
(``/api/notes/`` with a bearer token): the schema is the serializer's, validation errors name the
field, another user's note is refused with the HTTP API's own 403 detail, CRUD works."""

from __future__ import annotations

import asyncio

import pytest

from project.models import Note
from tests.support.notes_api import notes_world, sdk  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MODES = ["legacy", "auto"]  # 2025-11-25 sessions; 2026-07-28 (server/discover)


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize("mode", MODES)
def test_tools_list_shows_the_serializers_schema(notes_world, mode):
    async def go():
        async with sdk(notes_world, "alice", mode) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    tools = run(go())
    # (notes_app is the MCP Apps view of the same notes, project/mcp_tools.py, not a DRF tool)
    assert [name for name in tools if name.startswith("notes_") and name != "notes_app"] == [
        "notes_list",
        "notes_create",
        "notes_retrieve",
        "notes_partial_update",
        "notes_destroy",
    ]
    create = tools["notes_create"]
    assert create.input_schema == {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "A short title (at most 200 characters).", "maxLength": 200},
            "body": {"type": "string", "description": "The note's text."},
        },
        "required": ["title"],
        "additionalProperties": False,
    }
    assert sorted(create.output_schema["properties"]) == ["body", "created_at", "id", "owner", "title", "updated_at"]
    assert create.description.startswith("Create a new note.\n\nYour notes:")
    assert (create.annotations.read_only_hint, create.annotations.destructive_hint) == (False, False)
    assert create.annotations.idempotent_hint is False

    retrieve = tools["notes_retrieve"]
    assert retrieve.input_schema["properties"] == {"pk": {"type": "integer", "description": "The pk of the note."}}
    assert retrieve.input_schema["required"] == ["pk"] and retrieve.annotations.read_only_hint is True
    patch = tools["notes_partial_update"]
    assert patch.input_schema["required"] == ["pk"] and sorted(patch.input_schema["properties"]) == [
        "body",
        "pk",
        "title",
    ]
    assert tools["notes_destroy"].annotations.destructive_hint is True
    assert tools["notes_destroy"].annotations.idempotent_hint is True and tools["notes_destroy"].output_schema is None
    listing = tools["notes_list"]
    assert sorted(listing.input_schema["properties"]) == ["page", "page_size", "search"]
    assert listing.output_schema["required"] == ["count", "results"]


@pytest.mark.parametrize("mode", MODES)
def test_create_retrieve_update_list_delete(notes_world, mode):
    async def go():
        seen = {}
        async with sdk(notes_world, "alice", mode) as client:
            seen["create"] = await client.call_tool("notes_create", {"title": "Plan", "body": "step one"})
            pk = seen["create"].structured_content["id"]
            seen["retrieve"] = await client.call_tool("notes_retrieve", {"pk": pk})
            seen["patch"] = await client.call_tool("notes_partial_update", {"pk": pk, "title": "Plan B"})
            seen["list"] = await client.call_tool("notes_list", {"search": "Plan"})
            seen["page"] = await client.call_tool("notes_list", {"page_size": 1, "page": 2})
            seen["destroy"] = await client.call_tool("notes_destroy", {"pk": pk})
            seen["gone"] = await client.call_tool("notes_retrieve", {"pk": pk})
            seen["pk"] = pk
        return seen

    seen = run(go())
    created = seen["create"].structured_content
    assert not seen["create"].is_error
    assert (created["title"], created["body"], created["owner"]) == ("Plan", "step one", "alice")
    assert seen["retrieve"].structured_content == created
    assert (
        seen["patch"].structured_content["title"] == "Plan B" and seen["patch"].structured_content["body"] == "step one"
    )
    listing = seen["list"].structured_content
    assert listing["count"] == 1 and [n["title"] for n in listing["results"]] == ["Plan B"]
    page = seen["page"].structured_content  # alice's two notes, one per page: the second page
    assert page["count"] == 2 and len(page["results"]) == 1 and page["next"] is None
    assert page["previous"].startswith(notes_world.base + "/api/notes/")
    assert not seen["destroy"].is_error and seen["destroy"].content[0].text == "Done (HTTP 204 No Content)."
    assert not Note.objects.filter(pk=seen["pk"]).exists()

    gone = seen["gone"]
    http = notes_world.http("GET", f"/api/notes/{seen['pk']}/", "alice")
    assert http.status_code == 404
    assert gone.is_error and gone.content[0].text == http.json()["detail"]
    assert gone.structured_content == {"status": 404, "detail": http.json()["detail"], "code": "not_found"}


@pytest.mark.parametrize("mode", MODES)
def test_invalid_input_is_a_tool_error_naming_the_field(notes_world, mode):
    async def go():
        async with sdk(notes_world, "alice", mode) as client:
            blank = await client.call_tool("notes_create", {"title": ""})
            missing = await client.call_tool("notes_create", {"body": "no title"})
            return blank, missing

    blank, missing = run(go())
    http = notes_world.http("POST", "/api/notes/", "alice", json={"title": ""})
    assert http.status_code == 400 and http.json() == {"title": ["This field may not be blank."]}
    assert blank.is_error
    assert blank.content[0].text == "Invalid arguments for tool 'notes_create': title: This field may not be blank."
    assert blank.structured_content == {
        "status": 400,
        "errors": [{"field": "title", "message": "This field may not be blank."}],
    }
    assert missing.is_error and "title" in missing.content[0].text and "required" in missing.content[0].text
    assert Note.objects.count() == 1


@pytest.mark.parametrize("mode", MODES)
def test_another_users_note_is_refused_as_the_http_api_refuses_it(notes_world, mode):
    pk = notes_world.alice_note.pk

    async def go():
        async with sdk(notes_world, "bob", mode) as client:
            return [
                await client.call_tool("notes_retrieve", {"pk": pk}),
                await client.call_tool("notes_partial_update", {"pk": pk, "title": "mine now"}),
                await client.call_tool("notes_destroy", {"pk": pk}),
                await client.call_tool("notes_list", {}),
            ]

    retrieve, patch, destroy, listing = run(go())
    http = notes_world.http("GET", f"/api/notes/{pk}/", "bob")
    assert http.status_code == 403 and http.json() == {"detail": "You do not own this note."}
    assert notes_world.http("PATCH", f"/api/notes/{pk}/", "bob", json={"title": "x"}).status_code == 403
    assert notes_world.http("DELETE", f"/api/notes/{pk}/", "bob").status_code == 403
    for result in (retrieve, patch, destroy):
        assert result.is_error
        assert result.content[0].text == http.json()["detail"]
        assert result.structured_content == {
            "status": 403,
            "detail": "You do not own this note.",
            "code": "permission_denied",
        }
    assert listing.structured_content["count"] == 0  # bob lists his own notes: none
    note = Note.objects.get(pk=pk)
    assert (note.title, note.owner_id) == ("Groceries", notes_world.alice.pk)
