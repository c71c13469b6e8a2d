"""Text every database can store (mcp_oauth.shared.text): NUL and lone surrogates anywhere in a
value, invisible format characters, and the 400 ``invalid_request`` of the decorator (RFC 6749 §5.2)."""

from __future__ import annotations

import json

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from mcp_oauth.shared.text import (
    has_invisible_format_characters,
    refuse_unstorable_params,
    request_params_storable,
    storable,
    without_invisible_format_characters,
)


@pytest.mark.parametrize(
    "value",
    ["", "plain", "päss ✓ 日本語 🔑", 12, None, 1.5, ["a", {"b": ("c", 3)}], {"key": ["value", None]}],
)
def test_text_without_nul_or_surrogates_is_storable(value):
    assert storable(value) is True


@pytest.mark.parametrize(
    "value",
    [
        "a\x00b",
        "\ud800",
        ["ok", "bad\x00"],
        {"nested": {"deeper": ["x", "\udfff"]}},
        {"key\x00": "value"},  # keys count too
        ("fine", ("still fine", "lone \ud83d surrogate")),
    ],
)
def test_nul_or_a_lone_surrogate_anywhere_is_not_storable(value):
    assert storable(value) is False


def test_invisible_format_characters_are_found_and_removed():
    spoof = "Evil\u202eelgooG"
    assert has_invisible_format_characters(spoof) is True
    assert without_invisible_format_characters(spoof) == "EvilelgooG"
    hidden = "\ufeffA\u200bp\u2066p\u061c\u2060"
    assert without_invisible_format_characters(hidden) == "App"
    assert has_invisible_format_characters("Ordinary App — ünïcode") is False
    # the boundaries of the ranges are exact: U+2010 (hyphen) and U+202F (narrow no-break space) stay
    assert without_invisible_format_characters("a\u2010b\u202fc\u2069d") == "a\u2010b\u202fcd"


def test_request_params_storable_reads_the_query_and_form_bodies_only():
    factory = RequestFactory()
    assert request_params_storable(factory.get("/x", {"a": "1", "b": ["2", "3"]})) is True
    assert request_params_storable(factory.get("/x", {"a": "bad\x00"})) is False
    assert request_params_storable(factory.post("/x", {"state": "ok\x00"})) is False
    # a JSON body is not form parameters: the JSON endpoints check their own bodies
    body = json.dumps({"state": "ok\u0000"})
    assert request_params_storable(factory.post("/x", body, content_type="application/json")) is True


def test_the_decorator_answers_400_invalid_request_before_the_view_runs():
    calls = []

    @refuse_unstorable_params
    def view(request):
        calls.append(request)
        return HttpResponse("ran")

    factory = RequestFactory()
    refused = view(factory.post("/token", {"code": "abc\x00"}))
    assert refused.status_code == 400
    assert json.loads(refused.content) == {
        "error": "invalid_request",
        "error_description": "Parameters must be text without NUL characters or unpaired surrogates.",
    }
    assert calls == []
    assert view(factory.post("/token", {"code": "abc"})).content == b"ran"
    assert len(calls) == 1
    assert view.__name__ == "view"
