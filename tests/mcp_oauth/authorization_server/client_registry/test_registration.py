"""RFC 7591 dynamic registration responses and refusals."""

from __future__ import annotations

import json

import pytest
from oauth2_provider.models import get_application_model

from mcp_oauth.models import ClientProfile

pytestmark = pytest.mark.django_db

PUBLIC = {
    "client_name": "Claude-like client",
    "redirect_uris": ["http://127.0.0.1:33418/callback", "http://localhost/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
    "scope": "mcp",
    "client_uri": "https://client.example.com",
    "logo_uri": "https://client.example.com/logo.png",
    "application_type": "native",
    "unknown_extension_member": {"ignored": True},
}


def register(client, body, **extra):
    payload = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post("/oauth/register", payload, content_type="application/json", **extra)


def test_public_registration_is_complete(client, resource):
    response = register(client, PUBLIC)
    assert response.status_code == 201, response.content
    assert response["Cache-Control"] == "no-store"
    data = response.json()
    app = get_application_model().objects.get(client_id=data["client_id"])
    assert data["client_id_issued_at"] == int(app.created.timestamp())
    assert "client_secret" not in data and "client_secret_expires_at" not in data
    assert data["token_endpoint_auth_method"] == "none"
    for key in ("client_name", "scope", "client_uri", "logo_uri", "redirect_uris", "application_type"):
        assert data[key] == PUBLIC[key]
    assert "unknown_extension_member" not in data
    assert data["registration_access_token"] and data["registration_client_uri"].startswith("http://testserver/")
    assert app.client_type == "public" and app.registration_source == "dcr"
    assert ClientProfile.objects.get(application=app).metadata["scope"] == "mcp"


def test_confidential_registration_by_logged_in_user_gets_secret_expiry(client, user, resource):
    client.force_login(user)
    body = {**PUBLIC, "token_endpoint_auth_method": "client_secret_post"}
    response = register(client, body, HTTP_AUTHORIZATION="Bearer not-used-for-session")
    # a logged-in user may register a confidential client (DOT's IsAuthenticatedDCRPermission)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["client_secret"] and data["client_secret_expires_at"] == 0
    assert data["token_endpoint_auth_method"] == "client_secret_post"


def test_anonymous_confidential_registration_is_refused_clearly(client, resource):
    response = register(client, {**PUBLIC, "token_endpoint_auth_method": "client_secret_basic"})
    # RFC 7591 §3.2.2: a refusal is a 400 naming the field, not a 401 without a challenge
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"
    assert response.json()["error_description"].startswith("token_endpoint_auth_method: ")
    assert "public clients" in response.json()["error_description"]
    assert response["Cache-Control"] == "no-store" and "WWW-Authenticate" not in response
    assert not get_application_model().objects.exists()


def test_anonymous_confidential_when_allowed(client, settings, resource):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DCR_ALLOW_ANONYMOUS_CONFIDENTIAL": True}
    response = register(client, {**PUBLIC, "token_endpoint_auth_method": "client_secret_basic"})
    assert response.status_code == 201
    data = response.json()
    assert data["client_secret"] and data["client_secret_expires_at"] == 0
    assert data["token_endpoint_auth_method"] == "client_secret_basic"


@pytest.mark.parametrize(
    "redirect, field",
    [
        ("http://example.com/cb", "redirect_uris"),
        ("javascript:alert(1)", "redirect_uris"),
        (" JavaScript:alert(1)", "redirect_uris"),
        ("data:text/html,hi", "redirect_uris"),
        ("https://example.com/cb#frag", "redirect_uris"),
        ("https://user@example.com/cb", "redirect_uris"),
        ("myapp://callback", "redirect_uris"),
        (42, "redirect_uris"),
    ],
)
def test_bad_redirect_uris_are_refused_naming_the_field(client, resource, redirect, field):
    response = register(client, {**PUBLIC, "redirect_uris": [redirect]})
    assert response.status_code == 400
    data = response.json()
    assert data["error"] == "invalid_redirect_uri"
    assert field in data["error_description"]
    assert not get_application_model().objects.exists()


@pytest.mark.parametrize(
    "body, field",
    [
        ("not json", "JSON"),
        ("[1, 2]", "JSON"),
        ({**PUBLIC, "token_endpoint_auth_method": "private_key_jwt"}, "token_endpoint_auth_method"),
        ({**PUBLIC, "scope": "admin root"}, "scope"),
        ({**PUBLIC, "client_name": 7}, "client_name"),
        ({**PUBLIC, "logo_uri": "http://example.com/x.png"}, "logo_uri"),
        ({**PUBLIC, "response_types": ["token"]}, "response_types"),
        ({**PUBLIC, "grant_types": ["implicit"]}, "grant_type"),
        ({**PUBLIC, "redirect_uris": "http://127.0.0.1/cb"}, "redirect_uris"),
    ],
)
def test_bad_metadata_is_refused_naming_the_field(client, resource, body, field):
    response = register(client, body)
    assert response.status_code == 400, response.content
    data = response.json()
    assert data["error"] in ("invalid_client_metadata", "invalid_redirect_uri")
    assert field.lower() in data["error_description"].lower()
    assert not get_application_model().objects.exists()


def test_unsupported_grant_types_are_left_out_not_refused(client, resource):
    """RFC 7591 §2: a desktop client listing the device grant still registers; the grant is not echoed."""
    body = {
        **PUBLIC,
        "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        "response_types": ["code", "id_token"],
    }
    response = register(client, body)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["grant_types"] == ["authorization_code", "refresh_token"]
    assert data["response_types"] == ["code"]


@pytest.mark.parametrize(
    "body, error, field",
    [
        (
            {**PUBLIC, "application_type": "native", "redirect_uris": ["https://client.example.com/cb"]},
            "invalid_redirect_uri",
            "application_type native",
        ),
        (
            {**PUBLIC, "application_type": "native", "redirect_uris": ["com.example.app:/cb"]},
            "invalid_redirect_uri",
            "redirect_uris",
        ),
        (
            {**PUBLIC, "application_type": "web", "redirect_uris": ["http://127.0.0.1:3000/cb"]},
            "invalid_redirect_uri",
            "application_type web",
        ),
        ({**PUBLIC, "application_type": "service"}, "invalid_client_metadata", "application_type"),
        ({**PUBLIC, "software_statement": "not-a-jwt"}, "invalid_software_statement", "software_statement"),
        (
            {**PUBLIC, "grant_types": ["urn:ietf:params:oauth:grant-type:device_code"]},
            "invalid_client_metadata",
            "grant_types",
        ),
        (
            {**PUBLIC, "grant_types": ["authorization_code", "client_credentials"]},
            "invalid_client_metadata",
            "grant_types",
        ),
    ],
)
def test_rfc7591_refusals_are_400_with_the_code_and_field(client, resource, body, error, field):
    response = register(client, body)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == error
    assert field in response.json()["error_description"]
    assert response["Cache-Control"] == "no-store"
    assert not get_application_model().objects.exists()


def test_application_types_register_with_their_redirects(client, resource):
    native = register(client, {**PUBLIC, "application_type": "native"})
    assert native.status_code == 201 and native.json()["application_type"] == "native"
    web = register(client, {**PUBLIC, "application_type": "web", "redirect_uris": ["https://client.example.com/cb"]})
    assert web.status_code == 201 and web.json()["application_type"] == "web"


def test_well_formed_software_statement_is_ignored(client, resource):
    response = register(
        client, {**PUBLIC, "software_statement": "eyJhbGciOiJSUzI1NiJ9.eyJzb2Z0d2FyZV9pZCI6IngifQ.c2ln"}
    )
    assert response.status_code == 201, response.content
    assert "software_statement" not in response.json()


def test_every_management_401_carries_a_bearer_challenge(client, resource):
    registered = register(client, PUBLIC).json()
    path = f"/oauth/register/{registered['client_id']}"
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}):
        response = client.get(path, **headers)
        assert response.status_code == 401
        assert response.json()["error"] == "invalid_token"
        assert (
            response["WWW-Authenticate"].startswith("Bearer ")
            and 'error="invalid_token"' in response["WWW-Authenticate"]
        )
        assert response["Cache-Control"] == "no-store"


def test_registration_is_an_api_without_csrf(resource):
    """A native client has no CSRF cookie: the endpoint stays csrf-exempt (as DOT's) with the error mixin."""
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    assert register(strict, PUBLIC).status_code == 201
    refused = register(strict, {**PUBLIC, "application_type": "service"})
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_client_metadata"


def test_an_oversized_registration_body_is_a_json_413(client, resource):
    response = register(client, json.dumps({**PUBLIC, "client_name": "x" * 3_000_000}))
    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json()["error"] == "invalid_request"
    assert response["Cache-Control"] == "no-store"
    assert not get_application_model().objects.exists()


@pytest.mark.parametrize(
    "body, error, description",
    [
        (
            {**PUBLIC, "redirect_uris": ["http://127.0.0.1/cb\u0000x"]},
            "invalid_redirect_uri",
            "redirect_uris must be text without NUL characters or unpaired surrogates.",
        ),
        (
            {**PUBLIC, "client_name": "a\u0000b"},
            "invalid_client_metadata",
            "client_name must be text without NUL characters or unpaired surrogates.",
        ),
        (
            {**PUBLIC, "contacts": ["ops\u0000@example.com"]},
            "invalid_client_metadata",
            "contacts must be text without NUL characters or unpaired surrogates.",
        ),
        (
            {**PUBLIC, "redirect_uris": [f"http://127.0.0.1/cb{i}" for i in range(21)]},
            "invalid_redirect_uri",
            "redirect_uris: at most 20 URIs.",
        ),
        (
            {**PUBLIC, "redirect_uris": ["http://127.0.0.1/" + "a" * 2000]},
            "invalid_redirect_uri",
            "redirect_uris: each entry must be at most 2000 characters.",
        ),
    ],
)
def test_registration_refusals_name_the_field_exactly(client, resource, body, error, description):
    response = register(client, body)
    assert response.status_code == 400, response.content
    assert response.json() == {"error": error, "error_description": description}
    assert not get_application_model().objects.exists()


def test_twenty_redirect_uris_of_2000_characters_register(client, resource):
    uris = [f"http://127.0.0.1/{i:02d}" + "a" * 1981 for i in range(20)]
    assert len(uris[0]) == 2000
    response = register(client, {**PUBLIC, "redirect_uris": uris})
    assert response.status_code == 201, response.content


def test_management_put_with_another_client_id_is_refused(client, resource):
    registered = register(client, PUBLIC).json()
    other = register(client, PUBLIC).json()
    path = f"/oauth/register/{registered['client_id']}"
    response = client.put(
        path,
        json.dumps({**PUBLIC, "client_id": other["client_id"], "client_name": "renamed"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {registered['registration_access_token']}",
    )
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "client_id must be the client's own client_id.",
    }
    assert get_application_model().objects.get(client_id=registered["client_id"]).name == PUBLIC["client_name"]
    same = client.put(
        path,
        json.dumps({**PUBLIC, "client_id": registered["client_id"], "client_name": "renamed"}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {registered['registration_access_token']}",
    )
    assert same.status_code == 200, same.content


def test_every_management_put_401_is_no_store(client, resource):
    registered = register(client, PUBLIC).json()
    path = f"/oauth/register/{registered['client_id']}"
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer wrong"}):
        response = client.put(path, json.dumps(PUBLIC), content_type="application/json", **headers)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer ")
        assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("name", ["Evil\u202eelgooG", "Goo\u200bgle", "\u2067Google\u2069", "A\u202ab", "Google\u200e"])
def test_a_client_name_with_bidi_or_zero_width_characters_is_refused(client, resource, name):
    response = register(client, {**PUBLIC, "client_name": name})
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "client_name must not contain bidirectional or zero-width formatting characters.",
    }
    assert not get_application_model().objects.exists()


def test_the_consent_page_strips_bidi_characters_of_an_older_client(client, user, resource):
    from tests.support.oauth_helpers import authorize_params, pkce_pair

    registered = register(client, PUBLIC).json()
    get_application_model().objects.filter(client_id=registered["client_id"]).update(name="Evil\u202eelgooG")
    client.force_login(user)
    _, challenge = pkce_pair()
    app = get_application_model().objects.get(client_id=registered["client_id"])
    response = client.get("/oauth/authorize", authorize_params(app, challenge))
    assert response.status_code == 200
    page = response.content.decode()
    assert "\u202e" not in page
    assert "EvilelgooG" in page
