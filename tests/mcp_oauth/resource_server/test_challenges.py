"""Bearer authentication and challenges: the decorator and the DRF class share one builder."""

from __future__ import annotations

import pytest

from mcp_oauth.models import ProtectedResource

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.support.urls")]

RESOURCE = "http://testserver/mcp"
PRM = "http://testserver/.well-known/oauth-protected-resource/mcp"


def bearer(token):
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


@pytest.mark.parametrize("path", ["/api/plain", "/api/notes"])
def test_no_token_gets_bare_challenge(client, resource, path):
    response = client.get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == f'Bearer resource_metadata="{PRM}", scope="mcp"'


def test_exact_challenge_of_decorator(client, resource):
    assert client.get("/api/plain")["WWW-Authenticate"] == f'Bearer resource_metadata="{PRM}", scope="mcp"'
    response = client.get("/api/plain", **bearer("unknown-token"))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{PRM}", scope="mcp", error="invalid_token", '
        'error_description="The access token is invalid."'
    )


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


def test_insufficient_scope_decorator(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE, scope="mcp")
    response = client.get("/api/scoped", **bearer(token))
    assert response.status_code == 403
    assert response["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{PRM}", scope="mcp profile", error="insufficient_scope", '
        'error_description="The access token lacks the scopes: profile"'
    )


def test_drf_insufficient_scope_carries_challenge(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE, scope="mcp")
    response = client.get("/api/notes", **bearer(token))
    assert response.status_code == 403
    assert response["WWW-Authenticate"].startswith(f'Bearer resource_metadata="{PRM}", scope="mcp profile"')
    assert 'error="insufficient_scope"' in response["WWW-Authenticate"]


def test_drf_invalid_token_challenge(client, resource):
    response = client.get("/api/notes", **bearer("nope"))
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_drf_valid(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE, scope="mcp profile")
    response = client.get("/api/notes", **bearer(token))
    assert response.status_code == 200 and response.json() == {"user": "alice"}


def test_challenge_quotes_are_escaped(resource):
    from mcp_oauth.resource_server.challenges import bearer_challenge

    value = bearer_challenge(resource, error="invalid_token", error_description='say "hi"\r\nX-Injected: 1')
    assert '\\"hi\\"' in value and "\r" not in value and "\n" not in value
