"""Registration hygiene (issue #28): scope narrowing (RFC 7591 §3.2.1), identical registrations
from one address rate-limited, public clients without a user-facing grant refused."""

from __future__ import annotations

import json

import pytest
from oauth2_provider.models import get_application_model

from mcp_oauth.authorization_server.client_registry.registration_limits import registration_fingerprint
from mcp_oauth.models import ClientProfile

pytestmark = pytest.mark.django_db

BODY = {
    "client_name": "Desktop client",
    "redirect_uris": ["http://127.0.0.1:33418/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}


def register(client, body, **extra):
    return client.post("/oauth/register", json.dumps(body), content_type="application/json", **extra)


def without_issued(data: dict) -> dict:
    """The response body without the values minted per registration (checked separately)."""
    for key in ("client_id", "registration_access_token", "registration_client_uri", "client_id_issued_at"):
        assert data.pop(key)
    return data


# --- 1. scope narrowing (RFC 7591 §3.2.1) --------------------------------------------------------


def test_unsupported_scopes_are_left_out_and_the_subset_returned(client, resource):
    response = register(client, {**BODY, "scope": "openid mcp offline_access admin mcp email"})
    assert response.status_code == 201, response.content
    data = response.json()
    app = get_application_model().objects.get(client_id=data["client_id"])
    assert without_issued(data) == {
        "client_name": "Desktop client",
        "redirect_uris": ["http://127.0.0.1:33418/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": "mcp offline_access",
    }
    assert ClientProfile.objects.get(application=app).metadata["scope"] == "mcp offline_access"


def test_supported_scopes_keep_their_order(client, resource):
    response = register(client, {**BODY, "scope": "profile email mcp"})
    assert response.status_code == 201, response.content
    assert response.json()["scope"] == "profile mcp"


@pytest.mark.parametrize(
    ("scope", "registered"),
    [
        ("mcp\tprofile offline_access", "offline_access"),  # a tab is no separator: one token, not served
        ("mcp\u00a0profile mcp", "mcp"),  # nor is a no-break space
        ("mcp  profile", "mcp profile"),  # runs of spaces separate like one
    ],
)
def test_scopes_are_separated_by_spaces_only(client, resource, scope, registered):
    """RFC 6749 §3.3: ``scope = scope-token *( SP scope-token )``, a scope-token of NQCHAR (no
    control character, no space of another kind)."""
    response = register(client, {**BODY, "scope": scope})
    assert response.status_code == 201, response.content
    assert response.json()["scope"] == registered


def test_scopes_joined_by_other_whitespace_alone_are_refused(client, resource):
    response = register(client, {**BODY, "scope": "mcp\tprofile"})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert response.json()["error_description"].startswith("scope: none of the requested scopes")


def test_only_unsupported_scopes_are_refused_naming_scope(client, resource):
    response = register(client, {**BODY, "scope": "openid email openid"})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "scope: none of the requested scopes (openid email) is served here; "
        "supported: mcp offline_access profile.",
    }
    assert not get_application_model().objects.exists()


def test_management_put_narrows_the_scope_too(client, resource):
    data = register(client, BODY).json()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {data['registration_access_token']}"}
    body = {**BODY, "client_id": data["client_id"], "scope": "mcp admin"}
    response = client.put(
        f"/oauth/register/{data['client_id']}", json.dumps(body), content_type="application/json", **auth
    )
    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "mcp"


# --- 2. public clients and client_credentials ------------------------------------------------------


def test_a_public_client_with_only_client_credentials_is_refused(client, resource):
    body = {**BODY, "grant_types": ["client_credentials"], "redirect_uris": []}
    body.pop("response_types")
    response = register(client, body)
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "grant_types: client_credentials needs client authentication; a public client "
        '(token_endpoint_auth_method "none") registers authorization_code.',
    }
    assert not get_application_model().objects.exists()


def test_a_confidential_client_credentials_client_still_registers(client, settings, resource):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DCR_ALLOW_ANONYMOUS_CONFIDENTIAL": True}
    body = {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"}
    response = register(client, body)
    assert response.status_code == 201, response.content
    assert response.json()["grant_types"] == ["client_credentials"]


# --- 2. identical registrations from one address ---------------------------------------------------


@pytest.fixture
def identical_budget(settings, steady_throttle_clock):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": {"register": None, "register_identical": "3/hour"}}


def test_identical_registrations_from_one_address_get_429_after_the_budget(client, resource, identical_budget):
    ids = {register(client, BODY).json()["client_id"] for _ in range(3)}
    assert len(ids) == 3  # RFC 7591 §3.2.1: every registration is its own client
    refused = register(client, BODY)
    assert refused.status_code == 429
    assert refused["Retry-After"] == "1800"  # the steady clock stands in the middle of the hour
    assert refused["Cache-Control"] == "no-store"
    assert refused.json() == {
        "error": "slow_down",
        "error_description": "Too many identical registrations from this address; retry after 1800 seconds.",
    }
    assert get_application_model().objects.count() == 3


def test_the_budget_is_per_address_and_per_software(client, resource, identical_budget):
    for _ in range(3):
        assert register(client, BODY).status_code == 201
    assert register(client, BODY).status_code == 429
    assert register(client, BODY, REMOTE_ADDR="198.51.100.7").status_code == 201
    assert register(client, {**BODY, "client_name": "Another client"}).status_code == 201
    assert register(client, {**BODY, "redirect_uris": ["http://127.0.0.1:9/cb"]}).status_code == 201


def test_software_id_and_version_name_the_software(client, resource, identical_budget):
    body = {**BODY, "software_id": "4NRB1-0XZABZI9E6-5SM3R", "software_version": "2.1"}
    for index in range(3):
        # another name or redirect port: the same software
        assert register(client, {**body, "client_name": f"run {index}"}).status_code == 201
    assert register(client, {**body, "redirect_uris": ["http://127.0.0.1:1/cb"]}).status_code == 429
    assert register(client, {**body, "software_version": "2.2"}).status_code == 201


def test_refused_bodies_do_not_use_the_budget(client, resource, identical_budget):
    for _ in range(5):
        assert register(client, {**BODY, "scope": "admin"}).status_code == 400
    assert register(client, BODY).status_code == 201


def test_the_budget_can_be_switched_off(client, settings, resource, steady_throttle_clock):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": {"register": None, "register_identical": None}}
    for _ in range(12):
        assert register(client, BODY).status_code == 201


def test_the_default_budget_is_ten_an_hour(client, resource, steady_throttle_clock):
    for _ in range(10):
        assert register(client, BODY).status_code == 201
    assert register(client, BODY).status_code == 429


def test_fingerprints():
    base = registration_fingerprint({**BODY, "client_name": "x"})
    assert base == registration_fingerprint({**BODY, "client_name": "x", "scope": "mcp"})
    assert base == registration_fingerprint(
        {**BODY, "client_name": "x", "grant_types": ["refresh_token", "authorization_code"]}
    )
    assert base != registration_fingerprint({**BODY, "client_name": "y"})
    assert base != registration_fingerprint({**BODY, "client_name": "x", "token_endpoint_auth_method": "x"})
    software = registration_fingerprint({"software_id": "a", "software_version": "1", "client_name": "x"})
    assert software == registration_fingerprint({"software_id": "a", "software_version": "1", "client_name": "y"})
    assert software != registration_fingerprint({"software_id": "a", "software_version": "2", "client_name": "x"})
