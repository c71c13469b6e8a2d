"""The view decorator of the resource server (mcp_oauth.resource_server.decorators): its exact challenge and insufficient_scope."""

from __future__ import annotations

import pytest

from tests.mcp_oauth.resource_server.test_challenges import PRM, RESOURCE, bearer

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.support.urls")]


def test_exact_challenge_of_decorator(client, resource):
    assert client.get("/api/plain")["WWW-Authenticate"] == f'Bearer resource_metadata="{PRM}", scope="mcp"'
    response = client.get("/api/plain", **bearer("unknown-token"))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{PRM}", scope="mcp", error="invalid_token", '
        'error_description="The access token is invalid."'
    )


def test_insufficient_scope_decorator(client, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=RESOURCE, scope="mcp")
    response = client.get("/api/scoped", **bearer(token))
    assert response.status_code == 403
    assert response["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{PRM}", scope="mcp profile", error="insufficient_scope", '
        'error_description="The access token lacks the scopes: profile"'
    )
