"""Attacks on the DRF views published as tools (the reference site's ``notes_*``), through the official
Python SDK client: read-only fields smuggled in the arguments (owner, id, dates), wrong types,
huge values, another user's rows reached by lookup or search. Each is refused (a tool error naming
the argument) or has no effect, as over the HTTP API, and nothing is written."""

from __future__ import annotations

import asyncio

import pytest

from project.models import Note
from tests.support.notes_api import notes_world, sdk  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def run_calls(world, who: str, mode: str, calls: list[tuple[str, dict]]):
    async def go():
        async with sdk(world, who, mode) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_read_only_fields_smuggled_in_are_refused_and_the_http_api_ignores_them(notes_world, mode):
    note = notes_world.alice_note
    created, patched = run_calls(
        notes_world,
        "bob",
        mode,
        [
            ("notes_create", {"title": "Mine", "owner": "alice", "id": note.pk, "created_at": "2000-01-01T00:00:00Z"}),
            ("notes_partial_update", {"pk": note.pk, "owner": "bob"}),
        ],
    )
    assert created.is_error
    text = created.content[0].text
    assert text.startswith("Invalid arguments for tool 'notes_create': ")
    assert all(name in text for name in ("'owner'", "'id'", "'created_at'")) and "were unexpected" in text
    assert patched.is_error and "'owner' was unexpected" in patched.content[0].text
    assert Note.objects.count() == 1
    note.refresh_from_db()
    assert (note.owner_id, note.title) == (notes_world.alice.pk, "Groceries")

    # The HTTP API drops read-only fields: the note is bob's, with a fresh id, whatever was sent.
    http = notes_world.http("POST", "/api/notes/", "bob", json={"title": "Mine", "owner": "alice", "id": note.pk})
    assert http.status_code == 201
    body = http.json()
    assert body["owner"] == "bob" and body["id"] != note.pk
    assert Note.objects.get(pk=body["id"]).owner_id == notes_world.bob.pk


def test_wrong_types_are_refused_naming_the_argument(notes_world):
    pk = notes_world.alice_note.pk
    results = run_calls(
        notes_world,
        "alice",
        "legacy",
        [
            ("notes_create", {"title": 5}),
            ("notes_create", {"title": "ok", "body": ["a", "list"]}),
            ("notes_retrieve", {"pk": "1 OR 1=1"}),
            ("notes_retrieve", {"pk": 1.5}),
            ("notes_list", {"page": "two"}),
            ("notes_list", {"search": {"$ne": None}}),
            ("notes_partial_update", {"pk": pk, "title": None}),
        ],
    )
    expected = [
        "title: 5 is not of type 'string'",
        "body: ['a', 'list'] is not of type 'string'",
        "pk: '1 OR 1=1' is not of type 'integer'",
        "pk: 1.5 is not of type 'integer'",
        "page: 'two' is not of type 'integer'",
        "search: {'$ne': None} is not of type 'string'",
        "title: None is not of type 'string'",
    ]
    for result, message in zip(results, expected, strict=True):
        assert result.is_error and result.content[0].text.endswith(message), result.content[0].text
    assert list(Note.objects.values_list("title", flat=True)) == ["Groceries"]


def test_huge_values_are_refused_before_the_view(notes_world):
    many = {f"k{i}": i for i in range(500)}
    title, flood, big_pk, big_page = run_calls(
        notes_world,
        "alice",
        "legacy",
        [
            ("notes_create", {"title": "x" * 100_000}),
            ("notes_create", {"title": "ok", **many}),
            ("notes_retrieve", {"pk": 10**30}),
            ("notes_list", {"page": 10**30}),
        ],
    )
    assert title.is_error  # the reason, not the value echoed back
    assert title.content[0].text == (
        "Invalid arguments for tool 'notes_create': title: a value of 100000 characters fails maxLength: 200"
    )
    flooded = flood.content[0].text  # the unknown names listed, cut short
    assert flood.is_error and flooded.startswith(
        "Invalid arguments for tool 'notes_create': (arguments): Additional properties are not allowed ('k0', "
    )
    assert len(flooded) < 300
    # An id past any key column: the view's own 404, the same as over HTTP (never a 500).
    http = notes_world.http("GET", f"/api/notes/{10**30}/", "alice")
    assert http.status_code == 404
    assert big_pk.is_error and big_pk.content[0].text == http.json()["detail"]
    http_page = notes_world.http("GET", f"/api/notes/?page={10**30}", "alice")
    assert http_page.status_code == 404
    assert big_page.is_error and big_page.content[0].text == http_page.json()["detail"]
    assert Note.objects.count() == 1


def test_another_users_rows_do_not_leak_through_list_or_search(notes_world):
    (found,) = run_calls(notes_world, "bob", "auto", [("notes_list", {"search": "Groceries", "page_size": 100})])
    assert not found.is_error and found.structured_content["count"] == 0 and found.structured_content["results"] == []
    http = notes_world.http("GET", "/api/notes/?search=Groceries", "bob")
    assert http.json()["count"] == 0
