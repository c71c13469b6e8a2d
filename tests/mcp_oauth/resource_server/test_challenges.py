"""Bearer authentication and challenges: the decorator and the DRF class share one builder."""

from __future__ import annotations

import pytest

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


def test_challenge_quotes_are_escaped(resource):
    from mcp_oauth.resource_server.challenges import bearer_challenge

    value = bearer_challenge(resource, error="invalid_token", error_description='say "hi"\r\nX-Injected: 1')
    assert '\\"hi\\"' in value and "\r" not in value and "\n" not in value
