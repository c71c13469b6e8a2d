"""``mcp_oauth.mcp_server.mcp_apps.resources``: a view's ``ui://`` resource, registered once per view
and shared by the tools declaring it, listed and read with the extension's MIME type and ``_meta.ui``
(the ``APPS_CSP`` setting applied), rendered for the token's user and organization (never a browser
session), its markup autoescaped."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.mcp_apps import AppView
from mcp_oauth.mcp_server.mcp_apps.resources import AppResource, app_views
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.tools import ToolRegistry
from project.models import Note
from tests.support.mcp_apps_helpers import APPS_CAPS, MIME, URI, read, rpc
from tests.support.organization_fixtures import acme  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


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


def test_the_page_names_the_organization_the_token_acts_for(client, user, public_app, mint_token, acme):
    """At the organization's own endpoint the token acts for it: the template's ``organization``."""
    token = mint_token(user, public_app, resource="http://testserver/mcp/o/acme")
    result = rpc(client, token, "resources/read", {"uri": URI}, path="/mcp/o/acme")["result"]
    assert "<h1>Notes of alice (Acme Corp)</h1>" in result["contents"][0]["text"]


def test_without_an_organization_the_page_names_none(client, token):
    assert "<h1>Notes of alice</h1>" in read(client, token)["text"]


def test_tools_sharing_a_view_share_its_resource_and_app_only_tools_hide_from_plain_clients():
    tools, resources = _registries()
    view = AppView("notes/app.html", csp={"connectDomains": ["https://api.test"]})
    tools.register(lambda: "x", name="show", ui=view)
    tools.register(lambda: "y", name="refresh", ui="notes/app.html", visibility=["app"])
    assert [item.uri for item in resources.resources()] == ["ui://notes/app"]
    assert isinstance(resources.get_resource("ui://notes/app"), AppResource)
    assert app_views(resources) == [view]

    refresh = tools.get("refresh")
    assert refresh.listed_definition({}) is None
    assert refresh.listed_definition(APPS_CAPS).meta == {"ui": {"resourceUri": "ui://notes/app", "visibility": ["app"]}}
    assert tools.get("show").listed_definition({}).meta is None


def test_a_view_uri_taken_by_another_template_or_resource_is_refused():
    tools, resources = _registries()
    tools.register(lambda: "x", name="a", ui="notes/app.html")
    with pytest.raises(ValueError, match="already registered"):
        tools.register(lambda: "x", name="b", ui={"template": "other/page.html", "uri": "ui://notes/app"})
    resources.register_resource(lambda: "hi", "ui://plain/page")
    with pytest.raises(ValueError, match="already registered"):
        tools.register(lambda: "x", name="c", ui={"template": "plain/page.html"})


def _registries():
    resources = ResourceRegistry("t")
    return ToolRegistry("t", resources=resources), resources
