"""The view run for a tool call, as the token's user, and its response as a CallToolResult: real
views, the real database, the registry's own call path (sync tool in a worker thread)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.http import HttpResponse, JsonResponse
from django.test import RequestFactory
from rest_framework.response import Response

from mcp_oauth.mcp_server.drf_tools.invoke import flatten_errors, to_result
from mcp_oauth.mcp_server.tools import InvalidArguments, ToolContext, ToolRegistry
from mcp_oauth.resource_server.authentication import BearerPrincipal
from project.models import Note

from .views import Greeting, GreetView, NoteViewSet, RequestEcho, ThrottledViewSet, TwoPerMinute

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(db):
    User = get_user_model()
    return User.objects.create_user("alice", password="x"), User.objects.create_user("bob", password="x")


def ctx_for(user) -> ToolContext:
    principal = BearerPrincipal(
        user=user, application=None, access_token=None, scopes=frozenset({"mcp"}), resource=None
    )
    request = RequestFactory().post("/mcp", REMOTE_ADDR="203.0.113.9", HTTP_HOST="mcp.example.com")
    return ToolContext(principal=principal, session=None, request=request, request_id=1, protocol_version="2025-11-25")


def call(reg: ToolRegistry, name: str, arguments: dict, user):
    tool = reg.get(name)
    return async_to_sync(tool.call)(ctx_for(user), tool.validate_arguments(arguments))


@pytest.fixture
def reg() -> ToolRegistry:
    registry = ToolRegistry()
    registry.drf_viewset(NoteViewSet, basename="notes")
    return registry


def test_create_as_the_tokens_user_and_read_it_back(reg, users):
    alice, _ = users
    created = call(reg, "notes_create", {"title": "Plan", "body": "one"}, alice)
    assert not created.is_error
    note = Note.objects.get()
    assert note.owner == alice and created.structured_content["id"] == note.pk
    assert created.structured_content["owner"] == "alice"
    read = call(reg, "notes_retrieve", {"pk": note.pk}, alice)
    assert read.structured_content == created.structured_content
    listing = call(reg, "notes_list", {}, alice)
    assert [n["id"] for n in listing.structured_content["results"]] == [note.pk]  # a list, wrapped


def test_object_permission_refuses_another_user_with_the_views_message(reg, users):
    alice, bob = users
    note = Note.objects.create(owner=alice, title="Mine")
    for name, arguments in (
        ("notes_retrieve", {"pk": note.pk}),
        ("notes_update", {"pk": note.pk, "title": "x"}),
        ("notes_destroy", {"pk": note.pk}),
        ("notes_archive", {"pk": note.pk}),
    ):
        result = call(reg, name, arguments, bob)
        assert result.is_error and result.content[0].text == "You do not own this note.", name
        assert result.structured_content == {
            "status": 403,
            "detail": "You do not own this note.",
            "code": "permission_denied",
        }
    assert Note.objects.get().title == "Mine"


def test_a_token_without_a_user_is_anonymous(reg, users):
    """A client-credentials token authenticates (as over HTTP with MCPBearerAuthentication) as
    AnonymousUser: IsAuthenticated refuses with DRF's permission message."""
    result = call(reg, "notes_list", {}, None)
    assert result.is_error
    assert result.content[0].text == "You do not have permission to perform this action."
    assert result.structured_content["code"] == "permission_denied" and result.structured_content["status"] == 403


def test_validation_errors_name_each_field(reg, users):
    alice, _ = users
    result = call(reg, "notes_create", {"title": "   "}, alice)
    assert result.is_error
    assert result.structured_content == {
        "status": 400,
        "errors": [{"field": "title", "message": "This field may not be blank."}],
    }
    with pytest.raises(InvalidArguments) as caught:  # the schema, before the view
        reg.get("notes_create").validate_arguments({"title": 5, "owner": "bob"})
    assert {e["field"] for e in caught.value.errors} == {"", "title"}
    assert Note.objects.count() == 0


def test_missing_row_is_the_views_404(reg, users):
    alice, _ = users
    result = call(reg, "notes_retrieve", {"pk": 424242}, alice)
    assert result.is_error and result.structured_content["status"] == 404
    assert (
        result.structured_content["code"] == "not_found"
        and result.content[0].text == "No Note matches the given query."
    )


def test_extra_action_and_destroy(reg, users):
    alice, _ = users
    note = Note.objects.create(owner=alice, title="Old")
    archived = call(reg, "notes_archive", {"pk": note.pk}, alice)
    assert archived.structured_content == {"id": note.pk, "title": "[archived] Old"}
    gone = call(reg, "notes_destroy", {"pk": note.pk}, alice)
    assert (
        not gone.is_error and gone.content[0].text == "Done (HTTP 204 No Content)." and gone.structured_content is None
    )
    assert not Note.objects.exists()


def test_throttles_apply_unchanged(users):
    alice, _ = users
    TwoPerMinute.cache.clear()
    reg = ToolRegistry()
    reg.drf_viewset(ThrottledViewSet, basename="limited", actions=["list"])
    assert not call(reg, "limited_list", {}, alice).is_error
    assert not call(reg, "limited_list", {}, alice).is_error
    third = call(reg, "limited_list", {}, alice)
    assert (
        third.is_error and third.structured_content["status"] == 429 and third.structured_content["code"] == "throttled"
    )
    assert third.content[0].text.startswith("Request was throttled. Expected available in ")


def test_an_apiview_with_url_kwargs(users):
    alice, _ = users
    reg = ToolRegistry()
    reg.drf_view(GreetView, method="post", name="greet", serializer=Greeting, url_kwargs={"lang": {"type": "string"}})
    result = call(reg, "greet", {"lang": "fr", "name": "Ana", "shout": True}, alice)
    assert result.structured_content == {"text": "BONJOUR, ANA", "user": "alice"}
    with pytest.raises(InvalidArguments, match="name: 'AAAAAAAAAAAAAAAAAAAAA' is too long"):
        call(reg, "greet", {"lang": "fr", "name": "A" * 21}, alice)  # the schema's maxLength, before the view


def test_the_views_request_carries_the_callers_address_host_and_query(users, settings):
    settings.ALLOWED_HOSTS = ["mcp.example.com"]
    alice, _ = users
    reg = ToolRegistry()
    reg.drf_view(RequestEcho, method="get", name="echo_request")
    seen = call(reg, "echo_request", {"q": "x y", "n": 3, "flag": True}, alice).structured_content
    assert seen["remote_addr"] == "203.0.113.9"
    assert seen["url"].startswith("http://mcp.example.com/")
    assert seen["query"] == {"q": "x y", "n": "3", "flag": "true"}
    assert seen["user"] == "alice" and seen["auth_is_principal"] is True


def test_flatten_errors_nested_many_and_non_field():
    errors = {
        "non_field_errors": ["Pick one."],
        "shipping": {"street": ["Too long."]},
        "items": [{}, {"quantity": ["Too big.", "Odd."]}],
    }
    assert list(flatten_errors(errors)) == [
        {"field": "", "message": "Pick one."},
        {"field": "shipping.street", "message": "Too long."},
        {"field": "items.1.quantity", "message": "Too big."},
        {"field": "items.1.quantity", "message": "Odd."},
    ]
    assert list(flatten_errors(["Whole body wrong."])) == [{"field": "", "message": "Whole body wrong."}]


def test_to_result_of_other_answers():
    teapot = to_result("t", Response({"error": "odd"}, status=418))
    assert (
        teapot.is_error and teapot.content[0].text == '{"error": "odd"}' and teapot.structured_content["status"] == 418
    )
    empty = to_result("t", Response(None, status=599))
    assert empty.is_error and empty.content[0].text == "HTTP 599"
    listed = to_result("t", Response([1, 2], status=200))
    assert listed.structured_content == {"results": [1, 2]}
    many = to_result("t", Response({f"f{i}": ["bad"] for i in range(30)}, status=400))
    assert len(many.structured_content["errors"]) == 20


def test_to_result_of_a_plain_django_response():
    """A view that answers ``JsonResponse`` or ``HttpResponse`` rather than DRF's ``Response``."""
    ok = to_result("t", JsonResponse({"a": 1}))
    assert ok.structured_content == {"a": 1} and not ok.is_error
    text = to_result("t", HttpResponse("plain words", content_type="text/plain"))
    assert text.content[0].text == "plain words" and text.structured_content is None
    gone = to_result("t", HttpResponse("nothing here", status=410, content_type="text/plain"))
    assert gone.is_error and gone.content[0].text == "nothing here" and gone.structured_content["status"] == 410
    empty = to_result("t", HttpResponse(status=204))
    assert empty.content[0].text == "Done (HTTP 204 No Content)."
