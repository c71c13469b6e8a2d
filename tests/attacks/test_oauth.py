"""Hostile input at the OAuth endpoints: always an OAuth error, never a 500 (also on PostgreSQL)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_application_model

from tests.support.oauth_helpers import authorize_params, pkce_pair

pytestmark = pytest.mark.django_db

NASTY = ["\x00", "a\x00b", "é" * 3000, "' OR 1=1 --", "%00", "\r\nX-Injected: 1", ""]


@pytest.mark.parametrize("raw", [b"%ED%A0%80", b"%FF%FE", b"%00", b"%C0%80"])
@pytest.mark.parametrize("field", [b"client_id", b"code", b"grant_type", b"resource"])
def test_token_endpoint_raw_bytes(client, resource, public_app, field, raw):
    body = (
        b"grant_type=authorization_code&code=x&redirect_uri=http%3A%2F%2F127.0.0.1%2Fcallback&code_verifier="
        + b"v" * 50
    )
    body += b"&client_id=" + public_app.client_id.encode() + b"&" + field + b"=" + raw
    response = client.post("/oauth/token", body, content_type="application/x-www-form-urlencoded")
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["error"]


@pytest.mark.parametrize("raw", ["%ED%A0%80", "%FF%FE", "%00"])
def test_authorization_endpoint_raw_bytes(client, user, resource, public_app, raw):
    client.force_login(user)
    _, challenge = pkce_pair()
    query = urlencode(authorize_params(public_app, challenge)) + "&state=" + raw
    assert client.get("/oauth/authorize?" + query).status_code in (302, 400)


@pytest.mark.parametrize("value", NASTY)
@pytest.mark.parametrize(
    "field", ["client_id", "code", "refresh_token", "redirect_uri", "code_verifier", "resource", "grant_type", "scope"]
)
def test_token_endpoint(client, resource, public_app, field, value):
    data = {
        "grant_type": "refresh_token" if field == "refresh_token" else "authorization_code",
        "client_id": public_app.client_id,
        "code": "abc",
        "redirect_uri": "http://127.0.0.1/callback",
        "code_verifier": "v" * 50,
        "refresh_token": "r",
    }
    data[field] = value
    response = client.post("/oauth/token", data)
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["error"]


@pytest.mark.parametrize("value", NASTY)
@pytest.mark.parametrize(
    "field", ["client_id", "redirect_uri", "state", "scope", "resource", "code_challenge", "response_type"]
)
def test_authorization_endpoint(client, user, resource, public_app, field, value):
    client.force_login(user)
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    params[field] = value
    response = client.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code in (200, 302, 400), response.content[:300]


@pytest.mark.parametrize("value", NASTY)
@pytest.mark.parametrize("field", ["client_name", "scope", "client_uri", "software_id"])
def test_registration_endpoint(client, resource, field, value):
    body = {"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none", field: value}
    response = client.post("/oauth/register", json.dumps(body), content_type="application/json")
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert response.json()["error"] in ("invalid_client_metadata", "invalid_redirect_uri")
        assert not get_application_model().objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xfe",
        b"{" * 10000,
        b'{"redirect_uris": [' + b'"http://127.0.0.1/cb",' * 5000 + b'"x"]}',
        b"null",
        b"1e999",
    ],
)
def test_registration_garbage_bodies(client, resource, body):
    response = client.post("/oauth/register", body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]


@pytest.mark.parametrize("path", ["/oauth/revoke", "/oauth/introspect"])
@pytest.mark.parametrize("value", NASTY)
def test_revoke_and_introspect(client, resource, public_app, path, value):
    response = client.post(path, {"token": value, "client_id": public_app.client_id})
    assert response.status_code < 500, response.content[:300]
