"""End to end: the official MCP Python SDK client (mcp 2.3.0, legacy mode) against the live server's
resources, resource templates, prompts and completion (the demo in ``project/``), with two users.

Alice and Bob each own notes. Every path by which a row could travel (list, read, template
expansion, completion, subscription, notifications) is checked to carry Alice's rows to Alice
only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import (
    PromptReference,
    ResourceListChangedNotification,
    ResourceTemplateReference,
    ResourceUpdatedNotification,
)
from oauth2_provider.models import get_application_model

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from project.models import Note
from tests.support.live import free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: The reference site's folder skill (project/mcp_skills/): its template is registered first (at
#: start-up, before the site's mcp_resources modules), so its SKILL.md lists before the notes.
SKILL = "skill://release-notes/SKILL.md"


@dataclass
class Inbox:
    """What the SDK's message_handler received."""

    messages: list = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_message(self, message) -> None:
        self.messages.append(message)
        self.event.set()

    def of(self, kind) -> list:
        return [m for m in self.messages if isinstance(m, kind)]

    async def wait_for(self, kind, timeout: float = 10.0) -> list:
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.of(kind):
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                raise AssertionError(f"no {kind.__name__} within {timeout}s; got {self.messages!r}")
            self.event.clear()
            try:
                await asyncio.wait_for(self.event.wait(), remaining)
            except TimeoutError:
                pass
        return self.of(kind)


@dataclass
class World:
    base: str
    alice: object
    bob: object
    alice_token: str
    bob_token: str
    alice_notes: list
    bob_notes: list

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"


@pytest.fixture
def world(settings, mint_token, tmp_path):
    port = free_port()
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "BASE_URL": f"http://127.0.0.1:{port}",
        "SSE_POLL_INTERVAL_SECONDS": 0.05,
    }
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    settings.MEDIA_ROOT = str(tmp_path)
    resource = ensure_default_resource()
    User = get_user_model()
    alice = User.objects.create_user("alice", "alice@example.com", "pw-alice")
    bob = User.objects.create_user("bob", "bob@example.com", "pw-bob")
    Application = get_application_model()
    app = Application.objects.create(
        name="SDK",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    alice_notes = [
        Note.objects.create(owner=alice, title="Groceries", body="milk, eggs"),
        Note.objects.create(owner=alice, title="Garden plan", body="tomatoes in May"),
    ]
    alice_notes[0].attachment.save("list.bin", ContentFile(b"\x00\x01binary\xff"), save=True)
    bob_notes = [Note.objects.create(owner=bob, title="Gift ideas", body="a secret for bob only")]
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield World(
            base=base,
            alice=alice,
            bob=bob,
            alice_token=mint_token(alice, app, resource=resource.uri),
            bob_token=mint_token(bob, app, resource=resource.uri),
            alice_notes=alice_notes,
            bob_notes=bob_notes,
        )


@asynccontextmanager
async def sdk(world: World, token: str, inbox: Inbox | None = None) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(
            streamable_http_client(world.mcp_url, http_client=http),
            mode="legacy",
            message_handler=inbox.on_message if inbox else None,
        ) as client:
            yield client


async def all_resources(client: Client) -> list:
    found, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        found.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return found


def test_lists_reads_prompts_and_completes_for_the_owner_only(world):
    asyncio.run(lists_reads_prompts_and_completes(world))


async def lists_reads_prompts_and_completes(world):
    alice_pks = [note.pk for note in world.alice_notes]
    bob_pk = world.bob_notes[0].pk
    async with sdk(world, world.alice_token) as client:
        capabilities = client.server_capabilities
        assert capabilities.resources.subscribe is True and capabilities.resources.list_changed is True
        assert capabilities.prompts.list_changed is True and capabilities.completions is not None

        listed = await all_resources(client)
        # the notes view of MCP Apps (registered with its tools, project/mcp_tools.py) comes first
        assert [r.uri for r in listed] == [
            "ui://project/notes_app",
            "demo://readme",
            SKILL,
            *[f"notes://{pk}" for pk in alice_pks],
        ]
        listed = listed[1:]
        assert [r.name for r in listed[1:]] == ["release-notes", "Groceries", "Garden plan"]
        assert listed[0].mime_type == "text/markdown" and listed[0].annotations.priority == 0.5

        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["skill://{+path}", "notes://{pk}", "notes://{pk}/attachment"]

        readme = (await client.read_resource("demo://readme")).contents
        assert readme[0].mime_type == "text/markdown" and readme[0].text.startswith("# django-mcp-authz demo")
        assert listed[0].size == len(readme[0].text.encode())

        note = (await client.read_resource(f"notes://{alice_pks[0]}")).contents[0]
        assert note.mime_type == "application/json"
        assert json.loads(note.text)["body"] == "milk, eggs"

        blob = (await client.read_resource(f"notes://{alice_pks[0]}/attachment")).contents[0]
        assert base64.b64decode(blob.blob) == b"\x00\x01binary\xff"
        assert blob.mime_type == "application/octet-stream"

        # Bob's row and a row that does not exist: one answer, word for word.
        for uri in (f"notes://{bob_pk}", "notes://999999", f"notes://{bob_pk}/attachment"):
            with pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert caught.value.error.code == -32602
            assert caught.value.error.message == f"Resource not found: {uri}"

        with pytest.raises(MCPError) as caught:
            await client.read_resource("notes://abc")
        assert caught.value.error.code == -32602
        assert caught.value.error.message.startswith("Invalid resource URI notes://abc: parameter 'pk' must be")

        with pytest.raises(MCPError) as caught:
            await client.read_resource("no scheme here")
        assert caught.value.error.code == -32602 and caught.value.error.message.startswith("Malformed resource URI")

        prompts = (await client.list_prompts()).prompts
        summarize = next(p for p in prompts if p.name == "summarize_note")
        assert [(a.name, a.required) for a in summarize.arguments] == [("note", True), ("style", False)]

        got = await client.get_prompt("summarize_note", {"note": "Groceries", "style": "haiku"})
        assert got.messages[0].content.type == "resource"
        assert got.messages[0].content.resource.text == "milk, eggs"
        assert got.messages[1].content.text == "Summarize the note above as haiku."

        with pytest.raises(MCPError) as caught:
            await client.get_prompt("summarize_note", {})
        assert caught.value.error.code == -32602
        assert caught.value.error.message == "Missing required argument(s) for prompt 'summarize_note': note"

        # Bob's title is not a note of Alice's, even by name.
        other = await client.get_prompt("summarize_note", {"note": "Gift ideas"})
        assert "a secret for bob only" not in json.dumps(other.model_dump(mode="json"))

        titles = await client.complete(PromptReference(name="summarize_note"), {"name": "note", "value": "G"})
        assert titles.completion.values == ["Garden plan", "Groceries"]
        styles = await client.complete(
            PromptReference(name="summarize_note"),
            {"name": "style", "value": "b"},
            context_arguments={"note": "Groceries"},
        )
        assert styles.completion.values == ["bullet points"]

        pks = await client.complete(ResourceTemplateReference(uri="notes://{pk}"), {"name": "pk", "value": ""})
        assert pks.completion.values == sorted(str(pk) for pk in alice_pks)
        assert pks.completion.total == 2 and pks.completion.has_more is False

    async with sdk(world, world.bob_token) as client:
        listed = await all_resources(client)
        assert [r.uri for r in listed] == ["ui://project/notes_app", "demo://readme", SKILL, f"notes://{bob_pk}"]
        for pk in alice_pks:
            with pytest.raises(MCPError) as caught:
                await client.read_resource(f"notes://{pk}")
            assert caught.value.error.message == f"Resource not found: notes://{pk}"
        titles = await client.complete(PromptReference(name="summarize_note"), {"name": "note", "value": "G"})
        assert titles.completion.values == ["Gift ideas"]
        pks = await client.complete(ResourceTemplateReference(uri="notes://{pk}"), {"name": "pk", "value": ""})
        assert pks.completion.values == [str(bob_pk)]
        with pytest.raises(MCPError) as caught:
            await client.subscribe_resource(f"notes://{alice_pks[0]}")
        assert caught.value.error.message == f"Resource not found: notes://{alice_pks[0]}"


def save_in_another_thread(fn) -> None:
    """Run an ORM change in a fresh thread (as the admin's request thread would), then close its connection."""
    from django.db import connection

    def run():
        try:
            fn()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(10)


def test_subscription_gets_updated_after_a_save_and_other_users_get_nothing(world):
    asyncio.run(subscription_flow(world))


async def subscription_flow(world):
    note = world.alice_notes[0]
    uri = f"notes://{note.pk}"
    alice_inbox, bob_inbox = Inbox(), Inbox()
    async with sdk(world, world.alice_token, alice_inbox) as alice, sdk(world, world.bob_token, bob_inbox) as bob:
        await alice.subscribe_resource(uri)
        await bob.subscribe_resource(f"notes://{world.bob_notes[0].pk}")
        await asyncio.sleep(0.3)  # both GET streams open

        def edit():
            row = Note.objects.get(pk=note.pk)
            row.body = "milk, eggs, bread"
            row.save()

        await asyncio.to_thread(save_in_another_thread, edit)
        updated = await alice_inbox.wait_for(ResourceUpdatedNotification)
        assert [n.params.uri for n in updated] == [uri]
        changed = (await alice.read_resource(uri)).contents[0]
        assert json.loads(changed.text)["body"] == "milk, eggs, bread"

        # A new note of Alice's: list_changed to Alice.
        alice_inbox.messages.clear()
        await asyncio.to_thread(
            save_in_another_thread, lambda: Note.objects.create(owner=world.alice, title="New", body="fresh")
        )
        await alice_inbox.wait_for(ResourceListChangedNotification)

        await alice.unsubscribe_resource(uri)
        alice_inbox.messages.clear()
        await asyncio.to_thread(save_in_another_thread, edit)
        await alice_inbox.wait_for(ResourceListChangedNotification)
        assert alice_inbox.of(ResourceUpdatedNotification) == []

        await asyncio.sleep(0.5)
        leaked = [
            m
            for m in bob_inbox.messages
            if isinstance(m, (ResourceUpdatedNotification, ResourceListChangedNotification))
        ]
        assert leaked == []


# --- 2026-07-28 (stateless requests; mode="auto" negotiates it) -----------------------------


@asynccontextmanager
async def modern_sdk(world: World, token: str) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(world.mcp_url, http_client=http), mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            yield client


def test_modern_era_lists_reads_gets_and_completes_for_the_owner_only(world):
    asyncio.run(modern_flow(world))


async def modern_flow(world):
    alice_pks = [note.pk for note in world.alice_notes]
    bob_pk = world.bob_notes[0].pk
    async with modern_sdk(world, world.alice_token) as client:
        listed = (await client.list_resources(cache_mode="bypass")).resources
        assert [r.uri for r in listed] == [
            "ui://project/notes_app",
            "demo://readme",
            SKILL,
            *[f"notes://{pk}" for pk in alice_pks],
        ]
        note = (await client.read_resource(f"notes://{alice_pks[1]}", cache_mode="bypass")).contents[0]
        assert json.loads(note.text)["title"] == "Garden plan"
        with pytest.raises(MCPError) as caught:
            await client.read_resource(f"notes://{bob_pk}", cache_mode="bypass")
        assert (caught.value.error.code, caught.value.error.message) == (
            -32602,
            f"Resource not found: notes://{bob_pk}",
        )
        templates = (await client.list_resource_templates(cache_mode="bypass")).resource_templates
        assert [t.uri_template for t in templates] == ["skill://{+path}", "notes://{pk}", "notes://{pk}/attachment"]
        got = await client.get_prompt("summarize_note", {"note": "Garden plan"})
        assert got.messages[0].content.resource.text == "tomatoes in May"
        titles = await client.complete(PromptReference(name="summarize_note"), {"name": "note", "value": "G"})
        assert titles.completion.values == ["Garden plan", "Groceries"]

        # subscriptions/listen: Alice hears about her row; Bob, listening to the same URI, does not.
        uri = f"notes://{alice_pks[0]}"
        async with modern_sdk(world, world.bob_token) as bob:
            async with (
                client.listen(resource_subscriptions=[uri], resources_list_changed=True) as alice_sub,
                bob.listen(resource_subscriptions=[uri], resources_list_changed=True) as bob_sub,
            ):
                assert set(alice_sub.honored.model_dump(by_alias=True, exclude_none=True)) >= {"resourceSubscriptions"}

                def edit():
                    row = Note.objects.get(pk=alice_pks[0])
                    row.body = "milk, eggs, coffee"
                    row.save()

                await asyncio.to_thread(save_in_another_thread, edit)
                received = []

                async def collect(sub, into):
                    async for event in sub:
                        into.append(event)

                bob_events: list = []
                alice_task = asyncio.create_task(collect(alice_sub, received))
                bob_task = asyncio.create_task(collect(bob_sub, bob_events))
                deadline = asyncio.get_running_loop().time() + 10
                while len(received) < 2 and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(0.3)
                alice_task.cancel()
                bob_task.cancel()
                assert sorted(type(event).__name__ for event in received) == ["ResourceUpdated", "ResourcesListChanged"]
                assert [event.uri for event in received if isinstance(event, ResourceUpdated)] == [uri]
                assert bob_events == []
