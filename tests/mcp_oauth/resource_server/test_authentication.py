"""Bearer authentication (mcp_oauth.resource_server.authentication): tokens for another resource, unrestricted, expired, revoked, of an inactive user, in the query string, malformed or of another scheme."""

from __future__ import annotations

import pytest

from mcp_oauth.models import ProtectedResource
from tests.mcp_oauth.resource_server.test_challenges import RESOURCE, bearer

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.support.urls")]


def test_valid_token_passes(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE)
    response = client.get("/api/plain", **bearer(token))
    assert response.status_code == 200
    assert response.json() == {"user": "alice", "client": public_app.client_id}


def test_token_for_another_resource_is_refused(client, resource, user, public_app, mint_token):
    ProtectedResource.objects.create(uri="http://testserver/tenant/mcp", scopes="mcp")
    token = mint_token(user, public_app, resource="http://testserver/tenant/mcp")
    response = client.get("/api/plain", **bearer(token))
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]
    assert "not issued for this resource" in response.json()["error_description"]


def test_unrestricted_token_is_refused(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=None)
    assert client.get("/api/plain", **bearer(token)).status_code == 401


def test_expired_token_is_refused(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE, expires_in=-1)
    response = client.get("/api/plain", **bearer(token))
    assert response.status_code == 401
    assert response.json()["error_description"] == "The access token has expired."


def test_revoked_token_is_refused(client, resource, user, public_app, mint_token):
    from oauth2_provider.models import get_access_token_model

    token = mint_token(user, public_app, resource=RESOURCE)
    get_access_token_model().objects.get().revoke()
    assert client.get("/api/plain", **bearer(token)).status_code == 401


def test_inactive_user_token_is_refused(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE)
    user.is_active = False
    user.save()
    assert client.get("/api/plain", **bearer(token)).status_code == 401


def test_token_in_query_string_is_refused(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE)
    response = client.get(f"/api/plain?access_token={token}")
    assert response.status_code == 401
    assert 'error="invalid_request"' in response["WWW-Authenticate"]


@pytest.mark.parametrize("header", ["Bearer", "Bearer ", "Bearer a b", "Bearer \u00e9t\u00e9", "Bearer " + "a" * 5000])
def test_malformed_bearer_is_invalid_token(client, resource, header):
    response = client.get("/api/plain", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_other_scheme_is_no_credentials(client, resource):
    response = client.get("/api/plain", HTTP_AUTHORIZATION="Basic dXNlcjpwYXNz")
    assert response.status_code == 401
    assert "error=" not in response["WWW-Authenticate"]
