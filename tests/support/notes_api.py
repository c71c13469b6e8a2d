"""The reference site's notes (``/api/notes/`` and the ``notes_*`` tools) served live: two users, each
with an MCP token (resource ``<site>/mcp``, scope ``mcp``) and an API token (``<site>/api``, ``profile``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx2
import pytest
import requests
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_application_model

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from project.apps import ensure_api_resource
from project.models import Note
from tests.support.live import free_port, run_asgi_server


@dataclass
class NotesWorld:
    base: str
    alice: object
    bob: object
    mcp_tokens: dict
    api_tokens: dict
    alice_note: Note

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"

    def http(self, method: str, path: str, who: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.api_tokens[who]}"}
        return requests.request(method, self.base + path, headers=headers, timeout=30, **kwargs)


@pytest.fixture
def notes_world(settings, mint_token):
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    mcp_resource = ensure_default_resource()
    api_resource = ensure_api_resource()
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
    note = Note.objects.create(owner=alice, title="Groceries", body="milk, eggs")
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield NotesWorld(
            base=base,
            alice=alice,
            bob=bob,
            mcp_tokens={
                "alice": mint_token(alice, app, resource=mcp_resource.uri),
                "bob": mint_token(bob, app, resource=mcp_resource.uri),
            },
            api_tokens={
                "alice": mint_token(alice, app, scope="profile", resource=api_resource.uri),
                "bob": mint_token(bob, app, scope="profile", resource=api_resource.uri),
            },
            alice_note=note,
        )


@asynccontextmanager
async def sdk(world: NotesWorld, who: str, mode: str) -> AsyncIterator[Client]:
    """The official Python client, as ``who``, in ``mode`` (``"legacy"``: 2025-11-25; ``"auto"``: 2026-07-28)."""
    headers = {"Authorization": f"Bearer {world.mcp_tokens[who]}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(world.mcp_url, http_client=http), mode=mode) as client:
            yield client
