"""Resources, prompts and completion through the /mcp endpoint (Django test client, 2025-11-25 sessions).

Per-item scopes (403 step-up naming every scope), opaque cursors, errors with their JSON-RPC
codes (never a 500), per-user visibility of model rows, and notifications that follow the rows:
admin edits, ownership changes and deletions reach the owner's sessions and nobody else's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.test import Client

from mcp_oauth.mcp_server.registry import ModelResource
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.models import McpSessionEvent, ResourceSubscription
from project.models import Note

pytestmark = pytest.mark.django_db(transaction=True)

HEADERS = {"Accept": "application/json, text/event-stream"}


class Session:
    """One 2025-11-25 session of one token, through the Django test client."""

    def __init__(self, token: str) -> None:
        self.client = Client()
        self.token = token
        self.next_id = 1
        response = self.post(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        )
        assert response.status_code == 200, response.content
        self.id = response["Mcp-Session-Id"]
        self.initialize = json.loads(response.content)["result"]

    def post(self, method: str, params: dict | None = None):
        self.next_id += 1
        headers = {**HEADERS, "Authorization": f"Bearer {self.token}"}
        if getattr(self, "id", None):
            headers["Mcp-Session-Id"] = self.id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        return self.client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)

    def call(self, method: str, params: dict | None = None) -> dict:
        response = self.post(method, params)
        assert response.status_code == 200, (response.status_code, response.content)
        return json.loads(response.content)

    def result(self, method: str, params: dict | None = None) -> dict:
        body = self.call(method, params)
        assert "result" in body, body
        return body["result"]

    def error(self, method: str, params: dict | None = None) -> dict:
        body = self.call(method, params)
        assert "error" in body, body
        return body["error"]

    def outbox(self) -> list[dict]:
        return list(McpSessionEvent.objects.filter(session_id=self.id).order_by("id").values_list("message", flat=True))


@pytest.fixture
def registries(settings):
    resources, prompts = ResourceRegistry("test"), PromptRegistry("test")
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "RESOURCE_REGISTRY": resources, "PROMPT_REGISTRY": prompts}
    return resources, prompts


@pytest.fixture
def alice_token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, scope="mcp", resource=resource.uri)


@pytest.fixture
def bob_token(resource, other_user, public_app, mint_token):
    return mint_token(other_user, public_app, scope="mcp", resource=resource.uri)


def test_capabilities_follow_the_registries(registries, alice_token):
    resources, prompts = registries
    assert "resources" not in Session(alice_token).initialize["capabilities"]
    resources.register_resource(lambda: "x", "a://x", name="x")
    prompts.register(lambda: "p", name="p")
    capabilities = Session(alice_token).initialize["capabilities"]
    assert capabilities["resources"] == {"subscribe": True, "listChanged": True}
    assert capabilities["prompts"] == {"listChanged": True}
    assert capabilities["completions"] == {}


def test_item_scopes_hide_items_and_step_up_naming_every_scope(registries, resource, user, public_app, mint_token):
    resources, prompts = registries
    resources.register_resource(lambda: "public", "a://public", name="public")
    resources.register_resource(lambda: "secret", "a://secret", name="secret", scopes=["notes:read", "notes:admin"])
    resources.register_template(lambda ctx, id: id, "rows://{id}", name="rows", scopes=["notes:read"])
    prompts.register(lambda: "p", name="open")
    prompts.register(lambda topic: topic, name="closed", scopes=["prompts"], completers={"topic": lambda c, v: ["x"]})
    session = Session(mint_token(user, public_app, scope="mcp notes:read", resource=resource.uri))

    assert [r["uri"] for r in session.result("resources/list")["resources"]] == ["a://public"]
    assert [t["uriTemplate"] for t in session.result("resources/templates/list")["resourceTemplates"]] == [
        "rows://{id}"
    ]
    assert [p["name"] for p in session.result("prompts/list")["prompts"]] == ["open"]

    for method, params, needed in [
        ("resources/read", {"uri": "a://secret"}, "notes:read notes:admin"),
        ("resources/subscribe", {"uri": "a://secret"}, "notes:read notes:admin"),
        ("prompts/get", {"name": "closed", "arguments": {"topic": "t"}}, "prompts"),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "closed"}, "argument": {"name": "topic", "value": ""}},
            "prompts",
        ),
    ]:
        response = session.post(method, params)
        assert response.status_code == 403, (method, response.content)
        challenge = response["WWW-Authenticate"]
        assert 'error="insufficient_scope"' in challenge
        granted_and_needed = " ".join(dict.fromkeys(["mcp", "notes:read", *needed.split()]))
        assert f'scope="{granted_and_needed}"' in challenge, challenge
    assert session.result("resources/read", {"uri": "rows://7"})["contents"][0]["text"] == "7"


def test_cursors_are_opaque_signed_and_bound_to_the_method(registries, alice_token, settings):
    resources, _ = registries
    for index in range(5):
        resources.register_resource(lambda: "x", f"a://{index}", name=f"r{index}")
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "RESOURCE_PAGE_SIZE": 2}
    session = Session(alice_token)
    uris, cursor, pages = [], None, 0
    while True:
        page = session.result("resources/list", {"cursor": cursor} if cursor else {})
        pages += 1
        uris += [r["uri"] for r in page["resources"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
        assert "a://" not in cursor
    assert uris == [f"a://{i}" for i in range(5)] and pages == 3
    first = session.result("resources/list")["nextCursor"]
    for bad in ("garbage", first[:-2] + "xx", first.replace(":", ";")):
        error = session.error("resources/list", {"cursor": bad})
        assert (error["code"], error["message"]) == (-32602, "Invalid params for resources/list: unknown cursor")
    error = session.error("prompts/list", {"cursor": first})
    assert error["code"] == -32602


def test_errors_have_json_rpc_codes_and_never_500(registries, alice_token):
    resources, prompts = registries

    def broken(ctx):
        raise RuntimeError("database exploded with secret detail")

    resources.register_resource(broken, "a://broken", name="broken")

    def sized(ctx, n: int) -> str:
        return "x" * n

    resources.register_template(sized, "sized://{n}", name="sized", max_bytes=10)
    prompts.register(lambda: 42, name="bad_prompt")
    prompts.register(lambda x: x, name="needs_x", completers={"x": lambda c, v: 7})
    session = Session(alice_token)

    error = session.error("resources/read", {"uri": "a://broken"})
    assert error == {"code": -32603, "message": "Internal error while serving resources/read"}
    error = session.error("resources/read", {"uri": "sized://11"})
    assert (
        error["code"] == -32602
        and error["message"] == "Resource too large: sized://11 is 11 bytes, the limit is 10 bytes"
    )
    assert error["data"] == {"uri": "sized://11", "size": 11, "limit": 10}
    error = session.error("resources/read", {"uri": "sized://ten"})
    assert error["message"] == "Invalid resource URI sized://ten: parameter 'n' must be int, got 'ten'"
    error = session.error("resources/read", {})
    assert error["code"] == -32602 and error["message"].startswith("Invalid params for resources/read: uri")
    error = session.error("prompts/get", {"name": "bad_prompt"})
    assert error == {"code": -32603, "message": "The prompt 'bad_prompt' produced an invalid result"}
    error = session.error("prompts/get", {"name": "nope"})
    assert (error["code"], error["message"]) == (-32602, "Unknown prompt: nope")
    error = session.error("prompts/get", {"name": "needs_x"})
    assert error["message"] == "Missing required argument(s) for prompt 'needs_x': x"
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "needs_x"}, "argument": {"name": "x", "value": ""}},
    )
    assert error == {"code": -32603, "message": "The completer of prompt 'needs_x' returned an invalid value"}
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "nope://{x}"}, "argument": {"name": "x", "value": ""}},
    )
    assert error["message"] == "Unknown resource template: nope://{x}"
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "needs_x"}, "argument": {"name": "y", "value": ""}},
    )
    assert error["message"] == "Unknown argument for prompt 'needs_x': y"


def test_completers_receive_earlier_arguments(registries, alice_token):
    _, prompts = registries
    seen = []

    def cities(ctx, value):
        seen.append((ctx.arguments, value, ctx.user.username))
        return [c for c in {"fr": ["Paris", "Lyon"], "de": ["Berlin"]}[ctx.arguments["country"]] if c.startswith(value)]

    prompts.register(lambda country, city: f"{city}, {country}", name="trip", completers={"city": cities})
    result = Session(alice_token).result(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "trip"},
            "argument": {"name": "city", "value": "L"},
            "context": {"arguments": {"country": "fr"}},
        },
    )
    assert result["completion"] == {"values": ["Lyon"], "total": 1, "hasMore": False}
    assert seen == [({"country": "fr"}, "L", "alice")]


# --- model rows ------------------------------------------------------------------------------


@pytest.fixture
def notes_registry(registries, settings, tmp_path):
    resources, _ = registries
    settings.MEDIA_ROOT = str(tmp_path)
    resources.add(
        ModelResource(
            "mynotes://{pk}", model=Note, queryset=lambda ctx: Note.objects.filter(owner=ctx.user), name="note"
        )
    )
    resources.add(
        ModelResource(
            "myfiles://{pk}",
            model=Note,
            queryset=lambda ctx: Note.objects.filter(owner=ctx.user),
            file_field="attachment",
            name="file",
            max_bytes=8,
            listed=False,
        )
    )
    return resources


def test_a_reverse_relation_cannot_be_the_lookup(django_user_model):
    with pytest.raises(ValueError, match="lookup 'notes' is a reverse relation, not a field"):
        ModelResource(
            "owners://{notes}",
            model=django_user_model,
            queryset=lambda ctx: django_user_model.objects.all(),
            lookup="notes",
        )


def test_model_rows_reach_only_their_owner(notes_registry, alice_token, bob_token, user, other_user):
    mine = Note.objects.create(owner=user, title="mine", body="alice's")
    theirs = Note.objects.create(owner=other_user, title="theirs", body="bob's")
    alice = Session(alice_token)
    assert [r["uri"] for r in alice.result("resources/list")["resources"]] == [f"mynotes://{mine.pk}"]
    assert (
        json.loads(alice.result("resources/read", {"uri": f"mynotes://{mine.pk}"})["contents"][0]["text"])["body"]
        == "alice's"
    )
    missing = alice.error("resources/read", {"uri": "mynotes://99999"})
    hidden = alice.error("resources/read", {"uri": f"mynotes://{theirs.pk}"})
    assert hidden == {
        **missing,
        "message": missing["message"].replace("99999", str(theirs.pk)),
        "data": {"uri": f"mynotes://{theirs.pk}"},
    }
    assert hidden["code"] == -32602
    completion = alice.result(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "mynotes://{pk}"}, "argument": {"name": "pk", "value": ""}},
    )
    assert completion["completion"]["values"] == [str(mine.pk)]
    error = alice.error("resources/subscribe", {"uri": f"mynotes://{theirs.pk}"})
    assert error["message"] == f"Resource not found: mynotes://{theirs.pk}"
    assert not ResourceSubscription.objects.exists()


def test_file_field_blobs_and_their_size_limit(notes_registry, alice_token, user):
    small = Note.objects.create(owner=user, title="s")
    small.attachment.save("s.png", ContentFile(b"\x89PNG"), save=True)
    big = Note.objects.create(owner=user, title="b")
    big.attachment.save("b.bin", ContentFile(b"0123456789"), save=True)
    empty = Note.objects.create(owner=user, title="e")
    session = Session(alice_token)
    blob = session.result("resources/read", {"uri": f"myfiles://{small.pk}"})["contents"][0]
    assert blob == {"uri": f"myfiles://{small.pk}", "mimeType": "image/png", "blob": "iVBORw=="}
    error = session.error("resources/read", {"uri": f"myfiles://{big.pk}"})
    assert error["message"] == f"Resource too large: myfiles://{big.pk} is 10 bytes, the limit is 8 bytes"
    error = session.error("resources/read", {"uri": f"myfiles://{empty.pk}"})
    assert error["message"] == f"Resource not found: myfiles://{empty.pk}"


def methods(messages: list[dict]) -> list[tuple[str, str | None]]:
    return [(m["method"], (m.get("params") or {}).get("uri")) for m in messages]


def test_notifications_follow_the_row_and_never_reach_another_user(
    notes_registry, alice_token, bob_token, user, other_user
):
    note = Note.objects.create(owner=user, title="plan", body="v1")
    uri = f"mynotes://{note.pk}"
    alice, alice_other_client, bob = Session(alice_token), Session(alice_token), Session(bob_token)
    assert alice.result("resources/subscribe", {"uri": uri}) == {}
    assert alice.result("resources/subscribe", {"uri": uri}) == {}  # idempotent
    assert ResourceSubscription.objects.filter(session_id=alice.id, uri=uri).count() == 1

    note.body = "v2"
    note.save()
    assert methods(alice.outbox()) == [
        ("notifications/resources/updated", uri),
        ("notifications/resources/list_changed", None),
    ]
    assert methods(alice_other_client.outbox()) == [("notifications/resources/list_changed", None)]  # not subscribed
    assert bob.outbox() == []

    # Ownership moves to Bob: Alice's subscription no longer reaches her, Bob learns of a new row.
    note.owner = other_user
    note.save()
    assert methods(alice.outbox())[2:] == [("notifications/resources/list_changed", None)]  # no "updated"
    assert methods(bob.outbox()) == [("notifications/resources/list_changed", None)]

    note.owner = user
    note.save()
    assert methods(bob.outbox())[1:] == [("notifications/resources/list_changed", None)]  # it left Bob's list
    note.delete()
    assert methods(alice.outbox())[-2:] == [
        ("notifications/resources/updated", uri),
        ("notifications/resources/list_changed", None),
    ]
    assert len(bob.outbox()) == 2

    assert alice.result("resources/unsubscribe", {"uri": uri}) == {}
    assert not ResourceSubscription.objects.filter(session_id=alice.id).exists()


def test_an_admin_edit_notifies_the_owner_session(notes_registry, alice_token, bob_token, user, django_user_model):
    note = Note.objects.create(owner=user, title="plan", body="v1")
    alice, bob = Session(alice_token), Session(bob_token)
    alice.result("resources/subscribe", {"uri": f"mynotes://{note.pk}"})
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    browser = Client()
    browser.force_login(admin)
    response = browser.post(
        f"/admin/project/note/{note.pk}/change/",
        {"owner": user.pk, "title": "plan", "body": "edited in the admin", "attachment": ""},
    )
    assert response.status_code == 302, response.content[:500]
    assert ("notifications/resources/updated", f"mynotes://{note.pk}") in methods(alice.outbox())
    assert bob.outbox() == []


def test_subscriptions_per_session_are_bounded(registries, alice_token, settings):
    resources, _ = registries
    resources.register_template(lambda ctx, id: "x", "rows://{id}", name="rows")
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MAX_SUBSCRIPTIONS_PER_SESSION": 2}
    session = Session(alice_token)
    session.result("resources/subscribe", {"uri": "rows://1"})
    session.result("resources/subscribe", {"uri": "rows://2"})
    session.result("resources/subscribe", {"uri": "rows://2"})
    error = session.error("resources/subscribe", {"uri": "rows://3"})
    assert (error["code"], error["message"]) == (-32602, "Too many subscriptions: a session may hold 2")
