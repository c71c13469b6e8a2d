"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865) at the endpoint, on the reference site's notes
view (``project/mcp_tools.py``: ``notes_app`` and ``add_note`` share ``ui://project/notes_app``):
the tools' ``_meta.ui`` for a client that declared the extension only, the ``ui://`` resource
listed and read with the extension's MIME type and ``_meta.ui.csp``, rendered for the token's user
(never a browser session), the capability announced in both eras."""

from __future__ import annotations

import json

import pytest

from project.models import Note
from tests.support.mcp_apps_helpers import APPS_CAPS, EXT, MIME, URI, V, rpc, tools_by_name

pytestmark = pytest.mark.django_db


def test_tools_carry_the_view_only_for_a_client_that_declared_the_extension(client, token):
    plain = tools_by_name(client, token)
    assert "_meta" not in plain["notes_app"] and "_meta" not in plain["add_note"]

    apps = tools_by_name(client, token, caps=APPS_CAPS)
    assert apps["notes_app"]["_meta"] == {"ui": {"resourceUri": URI}}
    assert apps["add_note"]["_meta"] == {"ui": {"resourceUri": URI}}
    assert "_meta" not in apps["whoami"]


@pytest.mark.parametrize(
    "declared",
    [
        {EXT: {}},  # mimeTypes is required
        {EXT: {"mimeTypes": ["text/html"]}},
        {EXT: {"mimeTypes": MIME}},  # a string, not a list
        {"io.example/other": {"mimeTypes": [MIME]}},
    ],
)
def test_a_declaration_without_the_mime_type_is_no_declaration(client, token, declared):
    tools = tools_by_name(client, token, caps={"extensions": declared})
    assert "_meta" not in tools["notes_app"]


def test_the_extension_is_announced_in_both_eras(client, token):
    discover = rpc(client, token, "server/discover")["result"]
    assert discover["capabilities"]["extensions"][EXT] == {"mimeTypes": [MIME]}
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = client.post(
        "/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}),
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"},
    )
    assert response.json()["result"]["capabilities"]["extensions"][EXT] == {"mimeTypes": [MIME]}


def test_the_app_calls_add_note_for_the_token_user(client, token, user):
    result = rpc(client, token, "tools/call", {"name": "add_note", "arguments": {"title": " Plan "}}, APPS_CAPS)
    note = Note.objects.get(owner=user)
    assert result["result"]["structuredContent"] == {"id": note.pk, "title": "Plan", "body": ""}
    listed = rpc(client, token, "tools/call", {"name": "notes_app", "arguments": {}})["result"]
    assert listed["structuredContent"] == {"notes": [{"id": note.pk, "title": "Plan", "body": ""}]}


def test_a_token_without_the_resource_scope_cannot_read_the_view(client, user, public_app, resource, mint_token):
    bare = mint_token(user, public_app, scope="profile", resource=resource.uri)
    headers = {
        "Authorization": f"Bearer {bare}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": "resources/read",
        "Mcp-Name": URI,
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": URI}}
    response = client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response["WWW-Authenticate"]
