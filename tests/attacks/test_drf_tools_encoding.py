"""Arguments a DRF view cannot take as they are, through the registry's own call path (the reference
site's ``notes_*`` tools) and over HTTP: a lone surrogate (valid JSON ``"\\ud800"``, no UTF-8 form) and a
search text past what the database takes as a ``LIKE`` pattern. Each is a 400 naming the argument,
never "failed with an internal error" nor a 5xx, and nothing is written."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model

from project.mcp_tools import registry
from project.models import Note
from tests.mcp_oauth.mcp_server.drf_tools.test_invoke import ctx_for
from tests.support.token_exchange_helpers import api_resource

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    alice = get_user_model().objects.create_user("alice", password="x")
    Note.objects.create(owner=alice, title="Groceries", body="milk")
    return alice


def call(name: str, arguments: dict, user):
    tool = registry.get(name)
    return async_to_sync(tool.call)(ctx_for(user), tool.validate_arguments(arguments))


@pytest.mark.parametrize(
    "name, arguments, field",
    [
        ("notes_create", {"title": "x", "body": "a\ud800b"}, "body"),
        ("notes_create", {"title": "\udfff"}, "title"),
        ("notes_partial_update", {"pk": 1, "body": "\ud83d"}, "body"),  # half of an emoji's pair
        ("notes_list", {"search": "\ud800"}, "search"),  # a query-string argument
    ],
)
def test_a_lone_surrogate_is_refused_naming_the_argument(alice, name, arguments, field):
    if "pk" in arguments:
        arguments = {**arguments, "pk": Note.objects.get().pk}
    result = call(name, arguments, alice)
    assert result.is_error
    code = ord(
        next(ch for value in arguments.values() if isinstance(value, str) for ch in value if "\ud800" <= ch <= "\udfff")
    )
    message = f"Surrogate characters are not allowed: U+{code:X}."
    assert result.content[0].text == f"Invalid arguments for tool {name!r}: {field}: {message}"
    assert result.structured_content == {"status": 400, "errors": [{"field": field, "message": message}]}
    assert list(Note.objects.values_list("title", "body")) == [("Groceries", "milk")]


def test_a_huge_search_is_refused_as_a_tool_and_over_http(alice, client, mint_token, public_app):
    result = call("notes_list", {"search": "a" * 60_000}, alice)
    assert result.is_error
    message = "Ensure this field has no more than 200 characters."
    assert result.content[0].text == f"Invalid arguments for tool 'notes_list': search: {message}"
    token = mint_token(alice, public_app, scope="profile", resource=api_resource().uri)
    response = client.get("/api/notes/", {"search": "a" * 60_000}, HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 400
    assert response.json() == {"search": [message]}
    found = call("notes_list", {"search": "Grocer"}, alice)  # an ordinary search still works
    assert found.structured_content["count"] == 1
