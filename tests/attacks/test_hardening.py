"""Findings of the bad-input review, each as the attack that must fail."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from oauth2_provider.models import get_application_model

from tests.support.oauth_helpers import authorize_params, get_code, pkce_pair, token_request

pytestmark = pytest.mark.django_db

PUBLIC = {"redirect_uris": ["http://127.0.0.1:9999/cb"], "token_endpoint_auth_method": "none", "client_name": "Nice"}


def register(client, body=PUBLIC, **extra):
    response = client.post("/oauth/register", json.dumps(body), content_type="application/json", **extra)
    assert response.status_code == 201, response.content
    return response.json()


def put(client, data, body):
    return client.put(
        f"/oauth/register/{data['client_id']}",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {data['registration_access_token']}",
    )


@pytest.mark.parametrize(
    "change, error",
    [
        ({"redirect_uris": ["http://evil.example/cb"]}, "invalid_redirect_uri"),
        ({"grant_types": ["password"]}, "invalid_client_metadata"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"),
        ({"client_name": "a\x00b"}, "invalid_client_metadata"),
    ],
)
def test_client_update_goes_through_registration_rules(client, resource, change, error):
    data = register(client)
    response = put(client, data, {**PUBLIC, **change})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == error
    app = get_application_model().objects.get(client_id=data["client_id"])
    assert app.redirect_uris == "http://127.0.0.1:9999/cb" and app.client_type == "public"


def test_client_update_and_read_are_complete_and_not_cached(client, resource):
    data = register(client)
    response = put(client, data, {**PUBLIC, "client_name": "Renamed", "scope": "mcp"})
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["client_name"] == "Renamed" and body["scope"] == "mcp" and body["client_id_issued_at"]
    read = client.get(
        f"/oauth/register/{data['client_id']}", HTTP_AUTHORIZATION=f"Bearer {body['registration_access_token']}"
    )
    assert read.status_code == 200 and read["Cache-Control"] == "no-store"
    assert read.json()["scope"] == "mcp"


def test_registration_client_uri_ignores_host_header(client, settings, resource):
    settings.ALLOWED_HOSTS = ["*"]
    data = register(client, HTTP_HOST="evil.example")
    assert data["registration_client_uri"].startswith("http://testserver/oauth/register/")


@pytest.mark.parametrize(
    "field, value",
    [
        ("client_uri", "https://example.com/" + "a" * 600),
        ("logo_uri", "https://"),
        ("client_uri", "https://a b.example/"),
        ("client_name", "n" * 300),
    ],
)
def test_registration_refuses_bad_lengths_and_urls(client, resource, field, value):
    response = client.post("/oauth/register", json.dumps({**PUBLIC, field: value}), content_type="application/json")
    assert response.status_code == 400 and field in response.json()["error_description"]


def test_deeply_nested_registration_body(client, resource):
    body = "[" * 100000 + "]" * 100000
    response = client.post("/oauth/register", body, content_type="application/json")
    assert response.status_code == 400


@pytest.mark.parametrize("param", ["code", "code_verifier", "grant_type", "client_id", "redirect_uri"])
def test_repeated_token_parameters_are_invalid_request(client, user, resource, public_app, param):
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": "http://127.0.0.1/callback",
        "client_id": public_app.client_id,
        "code_verifier": verifier,
    }
    body = urlencode(data) + "&" + urlencode({param: data[param]})
    response = client.post("/oauth/token", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    assert param in response.json()["error_description"]


@pytest.mark.parametrize("credentials", [b"a\x00b:c", b"\xff\xfe:x", b"nocolon"])
def test_malformed_basic_credentials_are_invalid_client(client, resource, credentials):
    header = "Basic " + base64.b64encode(credentials).decode()
    for path in ("/oauth/token", "/oauth/revoke", "/oauth/introspect"):
        response = client.post(path, {"grant_type": "client_credentials", "token": "x"}, HTTP_AUTHORIZATION=header)
        assert response.status_code == 401 and response.json()["error"] == "invalid_client", path


def test_non_base64_basic_credentials(client, resource):
    response = client.post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION="Basic \u00ff\u00fe=="
    )
    assert response.status_code == 401


def test_oversized_token_body_is_413(client, settings, resource):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = client.post("/oauth/token", "a=" + "x" * 5000, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 413 and response.json()["error"] == "invalid_request"
    assert response["Cache-Control"] == "no-store"


@pytest.mark.parametrize("method", ["put", "patch", "delete"])
@pytest.mark.parametrize(
    "path", ["/oauth/authorize", "/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"]
)
def test_wrong_methods_are_405(client, resource, method, path):
    assert getattr(client, method)(path).status_code == 405


@pytest.mark.parametrize("challenge", ["abc", "!" * 43, "a" * 129])
def test_malformed_code_challenge_is_refused(client, user, resource, public_app, challenge):
    client.force_login(user)
    response = client.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert response.status_code == 302 and "error=invalid_request" in response["Location"]


def test_idle_refresh_token_expires(client, user, resource, public_app):
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    tokens = token_request(client, public_app, code, verifier).json()
    # DOT ages a refresh token from its access token's expiry (rotation slides it)
    from oauth2_provider.models import get_access_token_model

    get_access_token_model().objects.update(expires=timezone.now() - timedelta(days=31))
    response = client.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_introspection_metadata_does_not_offer_none(client, resource):
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert "none" not in data["introspection_endpoint_auth_methods_supported"]
    assert "none" in data["token_endpoint_auth_methods_supported"]


def test_password_and_implicit_are_unsupported(client, user, resource, public_app):
    response = client.post(
        "/oauth/token",
        {"grant_type": "password", "username": "alice", "password": "x", "client_id": public_app.client_id},
    )
    assert response.json()["error"] == "unsupported_grant_type"
    client.force_login(user)
    _, challenge = pkce_pair()
    response = client.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, response_type="token"))
    )
    assert "error=unsupported_response_type" in response["Location"]


def test_login_page_is_not_frameable_and_sends_no_cross_site_referrer(client, resource):
    response = client.get("/accounts/login/?next=/oauth/authorize%3Fclient_id%3Dx")
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert response["Referrer-Policy"] == "same-origin"
