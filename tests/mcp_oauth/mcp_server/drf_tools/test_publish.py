"""One tool per action: names, descriptions, annotations, lookup arguments, refusals at registration."""

from __future__ import annotations

import pytest
from rest_framework.views import APIView

from mcp_oauth.mcp_server.drf_tools.publish import annotations_for, view_tool, viewset_tools
from mcp_oauth.mcp_server.tools import ToolRegistry

from .views import Greeting, GreetView, NoteViewSet


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("GET", {"readOnlyHint": True, "openWorldHint": False}),
        ("post", {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}),
        ("put", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}),
        ("patch", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}),
        ("delete", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}),
    ],
)
def test_annotations_follow_the_http_method(method, expected):
    assert annotations_for(method) == expected


def test_every_action_by_default_in_router_order_then_extra_actions():
    tools = viewset_tools(NoteViewSet, basename="notes")
    assert [t.name for t in tools] == [
        "notes_list",
        "notes_create",
        "notes_retrieve",
        "notes_update",
        "notes_partial_update",
        "notes_destroy",
        "notes_archive",
    ]
    by_name = {t.name: t for t in tools}
    assert by_name["notes_create"].description == "Write a note down.\n\nNotes for the tests."  # the action's own
    assert by_name["notes_list"].description == "List the notes you may see.\n\nNotes for the tests."
    assert by_name["notes_update"].input_schema["required"] == ["pk", "title"]
    assert by_name["notes_partial_update"].input_schema["required"] == ["pk"]
    assert by_name["notes_list"].input_schema == {"type": "object", "properties": {}, "additionalProperties": False}
    assert by_name["notes_list"].output_schema["required"] == ["results"]  # no paginator: wrapped
    archive = by_name["notes_archive"]
    assert archive.endpoint.method == "post" and archive.endpoint.url_kwargs == ("pk",)
    assert archive.endpoint.url_name == "notes-archive" and archive.output_schema is None
    assert archive.description.startswith("Archive one note")


def test_chosen_actions_in_the_given_order():
    names = [t.name for t in viewset_tools(NoteViewSet, basename="memo", actions=["destroy", "list"])]
    assert names == ["memo_destroy", "memo_list"]


def test_refusals_at_registration():
    with pytest.raises(ValueError, match="has no action frobnicate"):
        viewset_tools(NoteViewSet, basename="notes", actions=["frobnicate"])
    with pytest.raises(ValueError, match="is not a DRF ViewSet class"):
        viewset_tools(GreetView, basename="greet")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="is not a DRF APIView class"):
        view_tool(NoteViewSet, method="get", name="x")
    with pytest.raises(ValueError, match="does not handle GET"):
        view_tool(GreetView, method="get", name="greet")
    reg = ToolRegistry()
    reg.drf_viewset(NoteViewSet, basename="notes", actions=["list"])
    with pytest.raises(ValueError, match="already registered"):
        reg.drf_viewset(NoteViewSet, basename="notes", actions=["list"])


def test_a_serializer_field_named_like_the_lookup_is_refused():
    class Clash(NoteViewSet):
        lookup_url_kwarg = "title"

    with pytest.raises(ValueError, match="argument names used twice or reserved: title"):
        viewset_tools(Clash, basename="clash", actions=["partial_update"])


def test_view_tool_of_an_apiview():
    tool = view_tool(
        GreetView,
        method="post",
        name="greet",
        serializer=Greeting,
        url_kwargs={"lang": {"type": "string", "enum": ["en", "fr"]}},
        url_name="greet",
    )
    assert tool.description == "Say hello in ``lang``."
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "lang": {"type": "string", "enum": ["en", "fr"]},
            "name": {"type": "string", "maxLength": 20},
            "shout": {"type": "boolean", "default": False},
        },
        "required": ["lang", "name"],
        "additionalProperties": False,
    }
    assert tool.annotations["idempotentHint"] is False


def test_view_tool_without_a_serializer_takes_any_object():
    class Plain(APIView):
        def get(self, request):
            raise NotImplementedError

    tool = view_tool(Plain, method="get", name="plain")
    assert tool.input_schema == {"type": "object"} and tool.description == ""


def test_registry_methods_register_with_scopes_and_schemas():
    reg = ToolRegistry()
    tools = reg.drf_viewset(NoteViewSet, basename="notes", actions=["retrieve"], scopes=["notes"])
    assert [t.name for t in reg] == ["notes_retrieve"] and tools[0].scopes == ("notes",)
    assert tools[0].annotations.read_only_hint is True
    greet = reg.drf_view(
        GreetView, method="post", name="greet", serializer=Greeting, url_kwargs={"lang": {"type": "string"}}
    )
    assert greet.input_schema["required"] == ["lang", "name"]
