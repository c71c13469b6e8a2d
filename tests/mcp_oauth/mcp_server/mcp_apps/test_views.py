"""The declaration side of MCP Apps: :class:`AppView` checks (URI, CSP origins), ``visibility``, ``ui``
values of a tool, the CSP system check. The view's resource: test_resources.py; the template tags
(``{% load mcp_app %}``): tests/mcp_oauth/templatetags/test_mcp_app.py."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.checks import check_apps_csp
from mcp_oauth.mcp_server.mcp_apps import AppView, client_supports_apps
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.tools import ToolRegistry

MIME = "text/html;profile=mcp-app"
APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}}


def test_the_default_uri_is_the_template_name_without_html():
    assert AppView("notes/app.html").uri == "ui://notes/app"
    assert AppView("notes/app.html", uri="ui://notes-server/dashboard").uri == "ui://notes-server/dashboard"


@pytest.mark.parametrize("uri", ["https://x.test/app", "ui://", "ui://a b", "ui://a/<b>", "UI://notes"])
def test_a_view_uri_must_be_a_plain_ui_uri(uri):
    with pytest.raises(ValueError, match="ui://"):
        AppView("notes/app.html", uri=uri)


@pytest.mark.parametrize(
    "csp",
    [
        {"connectDomains": ["*"]},
        {"connectDomains": ["https://api.example.com/path"]},
        {"connectDomains": ["'unsafe-eval'"]},
        {"connectDomains": ["https://a.test https://b.test"]},
        {"connectDomains": ["data:"]},
        {"connectDomains": ["https://a.test;script-src *"]},
        {"connectDomains": "https://a.test"},
        {"scriptDomains": ["https://a.test"]},
        {"resourceDomains": ["javascript://a.test"]},
    ],
)
def test_csp_entries_must_be_origins(csp):
    with pytest.raises(ValueError, match="CSP"):
        AppView("notes/app.html", csp=csp)


def test_csp_keeps_declared_origins_in_order_without_duplicates():
    view = AppView(
        "notes/app.html",
        csp={
            "connectDomains": ["https://api.test", "wss://live.test:8443", "https://api.test"],
            "resourceDomains": ["https://*.cdn.test", "http://[::1]:8000"],
            "frameDomains": [],
        },
    )
    assert view.effective_csp() == {
        "connectDomains": ["https://api.test", "wss://live.test:8443"],
        "resourceDomains": ["https://*.cdn.test", "http://[::1]:8000"],
    }


def test_the_setting_replaces_a_key_and_an_empty_list_removes_it(settings):
    view = AppView("notes/app.html", csp={"connectDomains": ["https://a.test"], "resourceDomains": ["https://b.test"]})
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "APPS_CSP": {view.uri: {"connectDomains": []}}}
    assert view.effective_csp() == {"resourceDomains": ["https://b.test"]}


def test_client_support_needs_the_mime_type():
    assert client_supports_apps(APPS) is True
    assert client_supports_apps({}) is False
    assert client_supports_apps({"extensions": {"io.modelcontextprotocol/ui": {}}}) is False


def _registries():
    resources = ResourceRegistry("t")
    return ToolRegistry("t", resources=resources), resources


def test_a_tools_own_meta_is_kept_beside_ui():
    tools, _ = _registries()
    tools.register(lambda: "x", name="show", ui="notes/app.html", meta={"com.example/x": 1})
    assert tools.get("show").listed_definition(APPS).meta == {
        "com.example/x": 1,
        "ui": {"resourceUri": "ui://notes/app"},
    }
    assert tools.get("show").listed_definition({}).meta == {"com.example/x": 1}


@pytest.mark.parametrize("visibility", [[], ["agent"], ["model", "user"]])
def test_visibility_values_are_model_and_app(visibility):
    tools, _ = _registries()
    with pytest.raises(ValueError, match="visibility"):
        tools.register(lambda: "x", name="t", ui="notes/app.html", visibility=visibility)


@pytest.mark.parametrize("ui", [42, {"template": "a.html", "colour": "red"}, ""])
def test_ui_must_describe_a_view(ui):
    tools, _ = _registries()
    with pytest.raises(ValueError):
        tools.register(lambda: "x", name="t", ui=ui)


@pytest.mark.parametrize(
    "value",
    [
        ["https://a.test"],
        {"https://a.test": {}},
        {"ui://notes/app": {"connectDomains": ["*"]}},
        {"ui://notes/app": {"imgDomains": ["https://a.test"]}},
    ],
)
def test_check_e150_refuses_a_malformed_csp_setting(settings, value):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "APPS_CSP": value}
    assert [m.id for m in check_apps_csp(None)] == ["mcp_oauth.E150"]


def test_check_e150_accepts_origins(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "APPS_CSP": {"ui://notes/app": {"connectDomains": ["https://a.test"]}}}
    assert check_apps_csp(None) == []
