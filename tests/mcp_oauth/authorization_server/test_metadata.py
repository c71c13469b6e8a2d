"""Discovery documents: RFC 8414, OIDC discovery, RFC 9728; one issuer everywhere; no Host trust."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

ISSUER = "http://testserver"


def test_as_metadata_at_root(client, resource):
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    data = response.json()
    assert data["issuer"] == ISSUER
    assert data["authorization_endpoint"] == "http://testserver/oauth/authorize"
    assert data["token_endpoint"] == "http://testserver/oauth/token"
    assert data["registration_endpoint"] == "http://testserver/oauth/register"
    assert data["revocation_endpoint"] == "http://testserver/oauth/revoke"
    assert data["code_challenge_methods_supported"] == ["S256"]
    assert "none" in data["token_endpoint_auth_methods_supported"]
    assert data["authorization_response_iss_parameter_supported"] is True
    assert data["response_types_supported"] == ["code"]
    assert "implicit" not in data["grant_types_supported"] and "password" not in data["grant_types_supported"]
    assert response["Access-Control-Allow-Origin"] == "*"


def test_oidc_discovery_includes_pkce_methods(client, resource):
    data = client.get("/.well-known/openid-configuration").json()
    assert data["issuer"] == ISSUER
    assert data["code_challenge_methods_supported"] == ["S256"]


def test_issuer_is_identical_in_prm_as_metadata_and_iss(client, resource):
    prm = client.get("/.well-known/oauth-protected-resource/mcp").json()
    as_meta = client.get("/.well-known/oauth-authorization-server").json()
    assert prm["authorization_servers"] == [as_meta["issuer"]] == [ISSUER]
    assert not as_meta["issuer"].endswith("/")


def test_prm_path_inserted_and_root(client, resource):
    prm = client.get("/.well-known/oauth-protected-resource/mcp")
    assert prm.status_code == 200
    data = prm.json()
    assert data == {
        "resource": "http://testserver/mcp",
        "authorization_servers": [ISSUER],
        "scopes_supported": ["mcp"],
        "bearer_methods_supported": ["header"],
        "resource_name": "django-mcp-authz demo",
        # RFC 9728 §2 / RFC 9449 §7 (mcp_oauth.dpop.metadata)
        "dpop_signing_alg_values_supported": ["ES256", "ES384", "PS256", "RS256", "EdDSA"],
        "dpop_bound_access_tokens_required": False,
    }
    assert client.get("/.well-known/oauth-protected-resource").json()["resource"] == "http://testserver/mcp"
    assert client.get("/.well-known/oauth-protected-resource/nothing").status_code == 404


def test_issuer_with_path_serves_path_inserted_forms(client, settings, resource):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ISSUER": "http://testserver/tenant"}
    assert client.get("/.well-known/oauth-authorization-server/tenant").json()["issuer"] == "http://testserver/tenant"
    assert client.get("/.well-known/openid-configuration/tenant").json()["issuer"] == "http://testserver/tenant"
    assert client.get("/tenant/.well-known/openid-configuration").json()["issuer"] == "http://testserver/tenant"
    assert client.get("/.well-known/oauth-authorization-server/other").status_code == 404
    assert client.get("/.well-known/oauth-protected-resource/mcp").json()["authorization_servers"] == [
        "http://testserver/tenant"
    ]


def test_spoofed_host_headers_do_not_change_urls(client, settings, resource):
    settings.ALLOWED_HOSTS = ["*"]
    settings.USE_X_FORWARDED_HOST = True
    headers = {"HTTP_HOST": "evil.example", "HTTP_X_FORWARDED_HOST": "evil.example", "HTTP_X_FORWARDED_PROTO": "https"}
    as_meta = client.get("/.well-known/oauth-authorization-server", **headers).json()
    prm = client.get("/.well-known/oauth-protected-resource/mcp", **headers).json()
    for value in [as_meta["issuer"], as_meta["token_endpoint"], as_meta["authorization_endpoint"], prm["resource"]]:
        assert "evil" not in value


def test_metadata_preflight(client, resource):
    response = client.options(
        "/.well-known/oauth-authorization-server",
        HTTP_ORIGIN="http://localhost:6274",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET",
    )
    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "GET" in response["Access-Control-Allow-Methods"]


def test_token_endpoint_cors_exposes_headers(client, resource):
    response = client.options(
        "/oauth/token", HTTP_ORIGIN="http://localhost:6274", HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST"
    )
    assert response.status_code == 204
    assert "POST" in response["Access-Control-Allow-Methods"]
    assert "WWW-Authenticate" in response["Access-Control-Expose-Headers"]


def test_no_cors_on_authorization_endpoint(client, resource):
    response = client.get("/oauth/authorize", HTTP_ORIGIN="https://evil.example")
    assert "Access-Control-Allow-Origin" not in response
