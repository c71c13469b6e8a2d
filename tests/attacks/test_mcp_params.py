"""Hostile MCP params through /mcp on the reference site's own registries (prompt
``summarize_note`` and its completers): never a database error, always -32602 naming the field."""

from __future__ import annotations

import pytest

from tests.mcp_oauth.mcp_server.registry.test_handlers import Session

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(resource, user, public_app, mint_token):
    return Session(mint_token(user, public_app, scope="mcp", resource=resource.uri))


def test_nul_in_prompt_arguments_is_invalid_params(session):
    error = session.error("prompts/get", {"name": "summarize_note", "arguments": {"note": "a\u0000b"}})
    assert error["code"] == -32602
    assert (
        error["message"]
        == "Invalid params for prompts/get: arguments.note must be text without NUL characters or unpaired surrogates"
    )
    assert error["data"] == {
        "errors": [{"field": "arguments.note", "message": "must be text without NUL characters or unpaired surrogates"}]
    }


def test_nul_in_a_completion_value_is_invalid_params(session):
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "summarize_note"}, "argument": {"name": "note", "value": "a\u0000"}},
    )
    assert error["code"] == -32602
    assert error["message"] == (
        "Invalid params for completion/complete: argument.value must be text without NUL characters or unpaired surrogates"
    )


def test_nul_in_a_params_key_is_invalid_params(session):
    error = session.error("prompts/get", {"name": "summarize_note", "arguments": {"no\u0000te": "x"}})
    assert error["code"] == -32602
    assert (
        error["message"]
        == "Invalid params for prompts/get: arguments must be text without NUL characters or unpaired surrogates"
    )


def test_clean_params_still_work(session):
    result = session.result(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "summarize_note"}, "argument": {"name": "style", "value": "bu"}},
    )
    assert result["completion"]["values"] == ["bullet points"]


def test_an_overlong_completion_value_is_invalid_params(session):
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "summarize_note"}, "argument": {"name": "note", "value": "%" * 200000}},
    )
    assert error["code"] == -32602
    assert error["message"] == (
        "Invalid params for completion/complete: argument.value must be at most 1000 characters"
    )
    error = session.error(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "summarize_note"},
            "argument": {"name": "style", "value": ""},
            "context": {"arguments": {"note": "x" * 1001}},
        },
    )
    assert error["code"] == -32602
    assert error["message"] == (
        "Invalid params for completion/complete: context.arguments.note must be at most 1000 characters"
    )


def test_completion_values_at_the_limit_and_like_wildcards_are_literal(session, user):
    from project.models import Note

    Note.objects.create(owner=user, title="100% done", body="b")
    Note.objects.create(owner=user, title="1000 things", body="b")
    Note.objects.create(owner=user, title="1_2", body="b")
    Note.objects.create(owner=user, title="102", body="b")

    def titles(value: str) -> list[str]:
        return session.result(
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "summarize_note"}, "argument": {"name": "note", "value": value}},
        )["completion"]["values"]

    assert titles("%" * 1000) == []
    assert titles("100%") == ["100% done"]
    assert titles("1_") == ["1_2"]
    assert titles("%") == []
