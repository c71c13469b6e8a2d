"""Resources, prompts and completion through the /mcp endpoint (Django test client, 2025-11-25 sessions).

Per-item scopes (403 step-up naming every scope), opaque cursors, errors with their JSON-RPC
codes (never a 500), per-user visibility of model rows, and notifications that follow the rows:
admin edits, ownership changes and deletions reach the owner's sessions and nobody else's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from mcp_oauth.mcp_server.registry import ModelResource
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.models import McpSessionEvent
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
