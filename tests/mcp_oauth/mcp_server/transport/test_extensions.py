"""MCP extensions offered in ``capabilities.extensions`` (``mcp_oauth.mcp_server.transport.extensions``) in both
eras, and what a client declared."""

from __future__ import annotations

import json

import pytest

from mcp_oauth.mcp_server.features import install_apps
from mcp_oauth.mcp_server.transport.extensions import (
    client_extension,
    register_extension,
    server_extensions,
    unregister_extension,
)

EXT = "com.example/test-extension"


SKILLS = {"io.modelcontextprotocol/skills": {"directoryRead": True}}
AUTH_EXTENSIONS = {
    "io.modelcontextprotocol/oauth-client-credentials": {},
    "io.modelcontextprotocol/enterprise-managed-authorization": {},
}


@pytest.fixture
def no_auth_extensions(settings):
    """The ext-auth extensions switched off, so only the test's own registrations are offered."""
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "CLIENT_CREDENTIALS_EXTENSION": False,
        "ENTERPRISE_MANAGED_AUTHORIZATION": False,
        "SKILLS_DIR_NAME": None,  # and no skill: the Skills extension is not offered either
    }


#: MCP Apps, offered in both eras while a tool has a view (the demo project's notes view).
APPS_EXTENSION = {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}


@pytest.fixture
def no_apps_extension():
    """MCP Apps not offered (as on a site without views)."""
    unregister_extension("io.modelcontextprotocol/ui")
    yield
    install_apps()


@pytest.fixture
def offered(no_auth_extensions):
    register_extension(EXT, {"level": 2})
    yield
    unregister_extension(EXT)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def _post(client, token, message, **headers):
    return client.post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}", **headers},
    )


@pytest.mark.django_db
def test_server_discover_offers_the_registered_extension(client, token, offered):
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            }
        },
    }
    response = _post(client, token, message, **{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
    assert response.status_code == 200, response.content
    # with the Tasks extension the app offers itself (2026-07-28 only)
    assert response.json()["result"]["capabilities"]["extensions"] == {
        EXT: {"level": 2},
        "io.modelcontextprotocol/tasks": {},
        **APPS_EXTENSION,
    }


@pytest.mark.django_db
def test_initialize_offers_the_registered_extension(client, token, offered):
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = _post(client, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert response.status_code == 200, response.content
    assert response.json()["result"]["capabilities"]["extensions"] == {EXT: {"level": 2}, **APPS_EXTENSION}


@pytest.mark.django_db
def test_nothing_is_offered_without_registrations(client, token, no_auth_extensions, no_apps_extension):
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = _post(client, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert "extensions" not in response.json()["result"]["capabilities"]


def test_a_callable_returning_none_switches_the_extension_off():
    register_extension(EXT, lambda: None)
    try:
        assert EXT not in server_extensions()
    finally:
        unregister_extension(EXT)


def test_an_extension_is_offered_only_in_its_eras():
    register_extension(EXT, {"x": 1}, eras={"modern"})
    try:
        assert server_extensions("modern")[EXT] == {"x": 1}
        assert EXT not in server_extensions("legacy")
        assert server_extensions()[EXT] == {"x": 1}
    finally:
        unregister_extension(EXT)


def test_client_extension_reads_only_declared_objects():
    assert client_extension({"extensions": {EXT: {"a": 1}}}, EXT) == {"a": 1}
    assert client_extension({"extensions": {EXT: True}}, EXT) is None
    assert client_extension({"extensions": []}, EXT) is None
    assert client_extension({}, EXT) is None


DISCOVER_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}


@pytest.mark.django_db
def test_auth_extensions_offered_in_both_eras(client, token):
    """MCP ext-auth: client credentials and Enterprise-Managed Authorization, in capabilities.extensions."""
    discover = _post(
        client,
        token,
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": DISCOVER_META}},
        **{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
    )
    # and the Tasks extension, offered to 2026-07-28 requests only; the Skills extension (the demo
    # project's project/mcp_skills/) in both eras
    assert discover.json()["result"]["capabilities"]["extensions"] == {
        **AUTH_EXTENSIONS,
        "io.modelcontextprotocol/tasks": {},
        **APPS_EXTENSION,
        **SKILLS,
    }
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    initialize = _post(client, token, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    assert initialize.json()["result"]["capabilities"]["extensions"] == {**AUTH_EXTENSIONS, **APPS_EXTENSION, **SKILLS}
