"""End to end: the official MCP Python SDK client (mcp 2.3) in both eras against the live server's
MCP Apps view (the reference site's ``notes_app`` / ``add_note`` and ``ui://project/notes_app``).

A client advertising the extension (``advertise("io.modelcontextprotocol/ui", {"mimeTypes": [...]})``)
sees the tools' ``_meta.ui.resourceUri``, reads the ``ui://`` resource rendered for its token's
user with the extension's MIME type and ``_meta.ui``, and the server's announcement; a client
without it sees the plain tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from oauth2_provider.models import get_application_model

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from project.models import Note
from tests.support.live import free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

URI = "ui://project/notes_app"


@pytest.fixture
def live(settings, mint_token):
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    User = get_user_model()
    alice = User.objects.create_user("alice", "alice@example.com", "pw-alice")
    bob = User.objects.create_user("bob", "bob@example.com", "pw-bob")
    app = get_application_model().objects.create(
        name="SDK",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    Note.objects.create(owner=alice, title="Groceries", body="milk <b>and</b> eggs")
    Note.objects.create(owner=bob, title="Bob's secret")
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield {"mcp": base + "/mcp", "token": mint_token(alice, app, resource=resource.uri), "alice": alice}


@asynccontextmanager
async def sdk(live, mode: str, apps: bool) -> AsyncIterator[Client]:
    extensions = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})] if apps else None
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {live['token']}"}, timeout=30) as http:
        async with Client(streamable_http_client(live["mcp"], http_client=http), mode=mode, extensions=extensions) as c:
            yield c


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_client_with_the_extension_reads_the_view(live, mode):
    asyncio.run(with_the_extension(live, mode))


async def with_the_extension(live, mode):
    async with sdk(live, mode, apps=True) as client:
        if mode == "legacy":  # pinned to 2026-07-28 the SDK does not discover (server/discover: unit tests)
            assert client.server_capabilities.extensions[EXTENSION_ID] == {"mimeTypes": [APP_MIME_TYPE]}
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["notes_app"].meta == {"ui": {"resourceUri": URI}}
        assert tools["add_note"].meta == {"ui": {"resourceUri": URI}}

        entry = next(r for r in (await client.list_resources()).resources if r.uri == URI)
        assert entry.mime_type == APP_MIME_TYPE == "text/html;profile=mcp-app"
        assert entry.meta == {"ui": {"csp": {}, "prefersBorder": True}}

        contents = (await client.read_resource(URI)).contents
        assert len(contents) == 1
        page = contents[0]
        assert page.uri == URI and page.mime_type == APP_MIME_TYPE
        assert page.meta == {"ui": {"csp": {}, "prefersBorder": True}}
        assert "Notes of alice" in page.text and "milk &lt;b&gt;and&lt;/b&gt; eggs" in page.text
        assert "Bob" not in page.text

        added = await client.call_tool("add_note", {"title": f"from {mode}"})
        assert not added.is_error and added.structured_content["title"] == f"from {mode}"
        # 2026-07-28 results are cacheable (ttlMs, cacheScope "private"): the SDK serves the cached page
        again = (await client.read_resource(URI, cache_mode="refresh")).contents[0].text
        assert f"from {mode}" in again


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_client_without_the_extension_sees_plain_tools(live, mode):
    asyncio.run(without_the_extension(live, mode))


async def without_the_extension(live, mode):
    async with sdk(live, mode, apps=False) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["notes_app"].meta is None and tools["add_note"].meta is None
        result = await client.call_tool("notes_app", {})
        assert [note["title"] for note in result.structured_content["notes"]] == ["Groceries"]
