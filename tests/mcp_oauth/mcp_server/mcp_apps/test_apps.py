"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865) at the endpoint, on the reference site's notes
view (``project/mcp_tools.py``: ``notes_app`` and ``add_note`` share ``ui://project/notes_app``):
the tools' ``_meta.ui`` for a client that declared the extension only, the ``ui://`` resource
listed and read with the extension's MIME type and ``_meta.ui.csp``, rendered for the token's user
(never a browser session), the capability announced in both eras."""

from __future__ import annotations

import json

import pytest

from project.models import Note
from tests.support.organization_fixtures import acme  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db

V = "2026-07-28"
URI = "ui://project/notes_app"
MIME = "text/html;profile=mcp-app"
EXT = "io.modelcontextprotocol/ui"
APPS_CAPS = {"extensions": {EXT: {"mimeTypes": [MIME]}}}


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def rpc(client, token, method, params=None, caps=None, path="/mcp"):
    """One stateless 2026-07-28 request; the JSON-RPC response object."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    elif method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(path, json.dumps(message), content_type="application/json", headers=headers)
    assert response.status_code in (200, 400, 403), response.content
    return response.json()


def tools_by_name(client, token, caps=None) -> dict:
    return {tool["name"]: tool for tool in rpc(client, token, "tools/list", caps=caps)["result"]["tools"]}


def read(client, token, caps=None) -> dict:
    result = rpc(client, token, "resources/read", {"uri": URI}, caps=caps)["result"]
    assert len(result["contents"]) == 1
    return result["contents"][0]


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


def test_the_view_is_listed_with_the_extension_mime_type_and_its_meta(client, token):
    resources = rpc(client, token, "resources/list")["result"]["resources"]
    entry = next(r for r in resources if r["uri"] == URI)
    assert entry == {
        "uri": URI,
        "name": "notes_app",
        "title": "My notes",
        "description": "Your notes, and a form adding one (an MCP Apps view).",
        "mimeType": MIME,
        "_meta": {"ui": {"csp": {}, "prefersBorder": True}},
    }


def test_read_renders_the_token_users_notes_escaped(client, token, user, other_user):
    Note.objects.create(owner=user, title="Groceries", body="milk")
    Note.objects.create(owner=user, title="<script>alert(1)</script>", body='<img src=x onerror="fetch(1)">')
    Note.objects.create(owner=other_user, title="Bob's secret", body="for bob only")
    contents = read(client, token)
    assert contents["uri"] == URI and contents["mimeType"] == MIME
    assert contents["_meta"] == {"ui": {"csp": {}, "prefersBorder": True}}
    html = contents["text"]
    assert html.startswith("<!DOCTYPE html>")
    assert "Notes of alice" in html and "Groceries" in html
    assert "Bob" not in html and "for bob only" not in html
    # autoescaped: the note's markup is text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(" not in html
    assert "&lt;img src=x onerror=&quot;fetch(1)&quot;&gt;" in html and "<img" not in html
    # the bridge and the inlined stylesheet
    assert 'data-app-name="Notes"' in html and "ui/initialize" in html and "--font-sans" in html


def test_read_never_carries_a_browser_session_or_csrf_token(client, token, user):
    client.force_login(user)  # a session cookie on the request: not the page's context
    html = read(client, token)["text"]
    assert "csrfmiddlewaretoken" not in html and "csrftoken" not in html
    assert client.cookies["sessionid"].value not in html


def test_another_token_sees_its_own_user(client, other_user, public_app, resource, mint_token, user):
    Note.objects.create(owner=user, title="Alice's plan")
    bob_token = mint_token(other_user, public_app, resource=resource.uri)
    html = read(client, bob_token)["text"]
    assert "Notes of bob" in html and "Alice's plan" not in html and "No notes yet." in html


def test_the_csp_setting_replaces_the_declared_domains(client, token, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "APPS_CSP": {URI: {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://*.cdn.test"]}},
    }
    contents = read(client, token)
    assert contents["_meta"]["ui"]["csp"] == {
        "connectDomains": ["https://api.example.com"],
        "resourceDomains": ["https://*.cdn.test"],
    }
    entry = next(r for r in rpc(client, token, "resources/list")["result"]["resources"] if r["uri"] == URI)
    assert entry["_meta"]["ui"]["csp"] == contents["_meta"]["ui"]["csp"]


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


def test_the_page_names_the_organization_the_token_acts_for(client, user, public_app, mint_token, acme):
    """At the organization's own endpoint the token acts for it: the template's ``organization``."""
    token = mint_token(user, public_app, resource="http://testserver/mcp/o/acme")
    result = rpc(client, token, "resources/read", {"uri": URI}, path="/mcp/o/acme")["result"]
    assert "<h1>Notes of alice (Acme Corp)</h1>" in result["contents"][0]["text"]


def test_without_an_organization_the_page_names_none(client, token):
    assert "<h1>Notes of alice</h1>" in read(client, token)["text"]
