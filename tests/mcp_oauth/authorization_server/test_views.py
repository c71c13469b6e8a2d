"""The authorization server's MCP profile: resources, PKCE, iss, consent, tokens."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model

from tests.support.oauth_helpers import (
    REDIRECT_URI,
    get_code,
    token_request,
)

pytestmark = pytest.mark.django_db

ISSUER = "http://testserver"
RESOURCE = "http://testserver/mcp"


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def test_refresh_keeps_binding_and_rotates(logged_in, public_app, settings):
    # No grace window: an immediate reuse is a reuse (tests/mcp_oauth/authorization_server/tokens/test_rotation.py covers the window).
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REFRESH_TOKEN_GRACE_SECONDS": 0}
    code, verifier, _ = get_code(logged_in, public_app, resource=RESOURCE)
    first = token_request(logged_in, public_app, code, verifier).json()
    refreshed = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": public_app.client_id},
    )
    assert refreshed.status_code == 200, refreshed.content
    second = refreshed.json()
    assert second["refresh_token"] != first["refresh_token"]
    newest = get_access_token_model().objects.order_by("-id").first()
    assert newest.resource == [RESOURCE]
    # reusing the old refresh token is refused and revokes the family
    reuse = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": first["refresh_token"], "client_id": public_app.client_id},
    )
    assert reuse.status_code == 400 and reuse.json()["error"] == "invalid_grant"
    after = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": second["refresh_token"], "client_id": public_app.client_id},
    )
    assert after.status_code == 400


@pytest.mark.parametrize(
    "data, error",
    [
        ({"grant_type": "password", "username": "alice", "password": "x"}, "unsupported_grant_type"),
        ({"grant_type": "nonsense"}, "unsupported_grant_type"),
        ({}, "invalid_request"),
        ({"grant_type": "urn:ietf:params:oauth:grant-type:device_code"}, "unsupported_grant_type"),
        ({"grant_type": "authorization_code", "code": "nope", "redirect_uri": REDIRECT_URI}, "invalid_client"),
    ],
)
def test_token_endpoint_errors_are_oauth_errors(client, resource, public_app, data, error):
    response = client.post("/oauth/token", data)
    assert 400 <= response.status_code < 500
    assert response.json()["error"] == error
    assert response["Cache-Control"] == "no-store"
