"""The DRF authentication class (mcp_oauth.resource_server.drf): insufficient_scope and invalid_token carry the challenge; a valid token passes."""

from __future__ import annotations

import pytest

from tests.mcp_oauth.resource_server.test_challenges import PRM, RESOURCE, bearer

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.support.urls")]


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
