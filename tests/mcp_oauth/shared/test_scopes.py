"""offline_access and the scope hierarchy (mcp_oauth.shared.scopes; MCP 2026-07-28 authorization changes)."""

from __future__ import annotations

import json

import pytest

from mcp_oauth.resource_server.challenges import bearer_challenge, insufficient_scope_response
from mcp_oauth.shared import scopes
from tests.support.oauth_helpers import get_code, token_request

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def test_as_metadata_lists_offline_access(client, resource):
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert "offline_access" in data["scopes_supported"]
    assert "refresh_token" in data["grant_types_supported"]


def test_prm_and_challenges_never_advertise_offline_access(client, resource):
    resource.scopes = "mcp offline_access"
    resource.save()
    prm = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert prm["scopes_supported"] == ["mcp"]
    challenge = client.post("/mcp", data="{}", content_type="application/json")
    assert challenge.status_code == 401
    assert 'scope="mcp"' in challenge["WWW-Authenticate"] and "offline_access" not in challenge["WWW-Authenticate"]


def test_offline_access_is_accepted_and_refresh_tokens_issued_either_way(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app, scope="mcp offline_access")
    with_offline = token_request(logged_in, public_app, code, verifier)
    assert with_offline.status_code == 200, with_offline.content
    assert with_offline.json()["scope"] == "mcp offline_access" and with_offline.json()["refresh_token"]
    code, verifier, _ = get_code(logged_in, public_app, scope="mcp")
    without = token_request(logged_in, public_app, code, verifier).json()
    assert without["scope"] == "mcp" and without["refresh_token"]


def test_consent_page_describes_offline_access(logged_in, public_app):
    from urllib.parse import urlencode

    from tests.support.oauth_helpers import authorize_params, pkce_pair

    _, challenge = pkce_pair()
    page = logged_in.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, scope="mcp offline_access"))
    )
    assert page.status_code == 200
    assert scopes.OFFLINE_ACCESS_DESCRIPTION in page.content.decode()


def test_offline_access_is_never_a_default_scope(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app, scope=None)
    assert "offline_access" not in token_request(logged_in, public_app, code, verifier).json()["scope"]


def test_hierarchy_is_transitive(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SCOPE_HIERARCHY": {"mcp:admin": ["mcp:write"], "mcp:write": ["mcp"]}}
    assert scopes.implied(["mcp:admin"]) == {"mcp:admin", "mcp:write", "mcp"}
    assert scopes.missing(["mcp:admin"], ["mcp", "mcp:write"]) == []
    assert scopes.missing(["mcp"], ["mcp", "mcp:write"]) == ["mcp:write"]
    assert scopes.challenge_scopes(["mcp", "mcp:write", "offline_access", "mcp"]) == ["mcp:write"]
    assert scopes.challenge_scopes(["mcp", "files"]) == ["mcp", "files"]


def test_one_challenge_names_every_needed_scope_whatever_the_token_holds(resource, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SCOPE_HIERARCHY": {"mcp:admin": ["mcp"]}}
    first = insufficient_scope_response(resource, ["files:read", "mcp:admin"], granted_scopes=["mcp"])
    second = insufficient_scope_response(resource, ["files:read", "mcp:admin"], granted_scopes=["mcp", "files:read"])
    assert first.status_code == second.status_code == 403
    expected = 'scope="files:read mcp:admin", error="insufficient_scope"'
    assert expected in first["WWW-Authenticate"] and expected in second["WWW-Authenticate"]
    assert json.loads(first.content)["error_description"] == "The access token lacks the scopes: files:read mcp:admin"
    assert json.loads(second.content)["error_description"] == "The access token lacks the scopes: mcp:admin"


def test_token_with_a_broader_scope_passes_the_resource_check(client, user, resource, public_app, mint_token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SCOPE_HIERARCHY": {"mcp:admin": ["mcp"]}}
    token = mint_token(user, public_app, scope="mcp:admin", resource=resource.uri)
    response = client.post(
        "/mcp",
        data=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        ),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    assert response.status_code == 200, response.content


def test_malformed_hierarchy_is_a_system_check_error(settings):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "SCOPE_HIERARCHY": {"mcp:admin": "mcp"},
        "REFRESH_TOKEN_GRACE_SECONDS": 3600,
    }
    ids = {message.id for message in run_checks()}
    assert {"mcp_oauth.E041", "mcp_oauth.E040"} <= ids


def test_bearer_challenge_default_scopes(resource):
    assert 'scope="mcp"' in bearer_challenge(resource)


@pytest.mark.urls("tests.support.urls")
@pytest.mark.parametrize("path", ["/api/notes", "/api/scoped"])  # DRF permission class, @require_bearer
def test_views_honour_the_hierarchy_and_challenge_the_same_way(
    client, user, resource, public_app, mint_token, settings, path
):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SCOPE_HIERARCHY": {"profile:admin": ["profile"]}}
    broad = mint_token(user, public_app, scope="mcp profile:admin", resource=resource.uri)
    assert client.get(path, HTTP_AUTHORIZATION=f"Bearer {broad}").status_code == 200
    challenges = set()
    for scope in ("mcp", "mcp offline_access"):
        narrow = mint_token(user, public_app, scope=scope, resource=resource.uri)
        response = client.get(path, HTTP_AUTHORIZATION=f"Bearer {narrow}")
        assert response.status_code == 403
        challenges.add(response["WWW-Authenticate"])
    assert len(challenges) == 1 and 'scope="mcp profile"' in challenges.pop()
