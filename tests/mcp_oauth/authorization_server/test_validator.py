"""The OAuth validator (mcp_oauth.authorization_server.validator): exact redirect URIs (loopback any port), PKCE before consent, wrong verifiers, code replay revoking what it issued, hashed codes and tokens, refused response types and grants."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model

from tests.mcp_oauth.authorization_server.test_views import (
    ISSUER,
    logged_in,  # noqa: F401 - fixtures
)
from tests.support.oauth_helpers import (
    authorize_params,
    get_code,
    pkce_pair,
    redirect_query,
    token_request,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "redirect", ["https://CLIENT.example.com/cb", "HTTPS://client.example.com/cb", "http://127.0.0.1:8080/callback/"]
)
def test_redirect_uri_is_an_exact_string_match(logged_in, public_app, redirect):
    _, challenge = pkce_pair()
    response = logged_in.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, redirect_uri=redirect))
    )
    assert response.status_code == 400 and "Location" not in response


@pytest.mark.parametrize(
    "pkce, description",
    [
        ({"code_challenge": None, "code_challenge_method": None}, "code_challenge"),
        ({"code_challenge_method": None}, "code_challenge_method"),
        ({"code_challenge_method": "plain"}, "S256"),
        ({"code_challenge_method": "S512"}, ""),
    ],
)
def test_pkce_refused_before_consent(logged_in, public_app, pkce, description):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, **pkce)
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    # Refused with a redirect to the (validated) client, not a consent page.
    assert response.status_code == 302
    query = redirect_query(response)
    assert query["error"] == "invalid_request"
    assert description.lower() in query.get("error_description", "").lower().replace(" ", "_")
    assert query["iss"] == ISSUER


def test_duplicate_code_challenge_is_invalid_request(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    query = urlencode(params) + "&code_challenge=" + challenge
    assert redirect_query(logged_in.get("/oauth/authorize?" + query))["error"] == "invalid_request"


def test_wrong_verifier_is_invalid_grant(logged_in, public_app):
    code, _, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, "x" * 50)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def _mcp_status(client, token):
    return client.post(
        "/mcp",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    ).status_code


def test_code_replay_is_refused_and_revokes_what_it_issued(logged_in, public_app):
    from mcp_oauth.signals import authorization_code_replayed

    seen = []
    authorization_code_replayed.connect(lambda **kw: seen.append(kw), weak=False, dispatch_uid="test-replay")
    try:
        code, verifier, _ = get_code(logged_in, public_app)
        first = token_request(logged_in, public_app, code, verifier).json()
        assert _mcp_status(logged_in, first["access_token"]) != 401
        replay = token_request(logged_in, public_app, code, verifier)
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        # the tokens issued from the code are dead
        assert _mcp_status(logged_in, first["access_token"]) == 401
        refresh = logged_in.post(
            "/oauth/token",
            {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": public_app.client_id},
        )
        assert refresh.status_code == 400
        assert len(seen) == 1
    finally:
        authorization_code_replayed.disconnect(dispatch_uid="test-replay")


def test_code_replay_with_wrong_verifier_revokes_nothing(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    replay = token_request(logged_in, public_app, code, "w" * 50)
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert _mcp_status(logged_in, first["access_token"]) != 401


def test_redeemed_code_is_stored_hashed(logged_in, public_app):
    from mcp_oauth.models import RedeemedAuthorizationCode

    code, verifier, _ = get_code(logged_in, public_app)
    token_request(logged_in, public_app, code, verifier)
    stored = RedeemedAuthorizationCode.objects.get()
    assert stored.code_checksum != code and len(stored.code_checksum) == 64
    assert stored.access_token is not None and stored.token_family is not None


@pytest.mark.parametrize("port", ["", ":1", ":8080", ":65535"])
def test_loopback_redirect_matches_any_port(logged_in, public_app, port):
    redirect = f"http://127.0.0.1{port}/callback"
    code, verifier, _ = get_code(logged_in, public_app, redirect_uri=redirect)
    response = token_request(logged_in, public_app, code, verifier, redirect_uri=redirect)
    assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    "redirect",
    [
        "https://client.example.com/cb/",
        "https://client.example.com/CB",
        "https://client.example.com/cb?x=1",
        "https://client.example.com:8443/cb",
        "http://client.example.com/cb",
        "https://evil.client.example.com/cb",
        "https://client.example.com@evil.example/cb",
        "http://127.0.0.1/other",
    ],
)
def test_redirect_uri_matches_exactly(logged_in, public_app, redirect):
    _, challenge = pkce_pair()
    response = logged_in.get(
        "/oauth/authorize?" + urlencode(authorize_params(public_app, challenge, redirect_uri=redirect))
    )
    assert response.status_code == 400
    assert "Location" not in response


def test_issued_tokens_are_long_random_and_stored_hashed(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    body = token_request(logged_in, public_app, code, verifier).json()
    assert len(body["access_token"]) >= 22 and len(body["refresh_token"]) >= 22
    stored = get_access_token_model().objects.get()
    assert stored.token != body["access_token"]
    assert body["access_token"] not in json.dumps(list(get_access_token_model().objects.values()), default=str)


def test_public_client_credentials_grant_is_unauthorized_client(client, public_app):
    response = client.post("/oauth/token", {"grant_type": "client_credentials", "client_id": public_app.client_id})
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "unauthorized_client"
    assert response["Cache-Control"] == "no-store"
    # an unknown client stays invalid_client
    unknown = client.post("/oauth/token", {"grant_type": "client_credentials", "client_id": "nobody"})
    assert unknown.status_code == 401 and unknown.json()["error"] == "invalid_client"
