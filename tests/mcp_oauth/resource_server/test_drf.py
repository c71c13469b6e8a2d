"""The DRF authentication class (mcp_oauth.resource_server.drf): insufficient_scope and invalid_token carry the challenge; a valid token passes."""

from __future__ import annotations

import pytest

from project.apps import ensure_api_resource
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


@pytest.mark.urls("project.urls")
def test_mcp_resource_may_be_a_path_relative_to_base_url(client, resource, user, public_app, mint_token):
    """The reference site's NoteViewSet names ``mcp_resource = "/api"``: tokens for ``<BASE_URL>/api``
    pass, tokens for the MCP endpoint's resource are refused (RFC 8707 audience)."""
    api = ensure_api_resource()
    assert api.uri.endswith("/api")
    good = mint_token(user, public_app, resource=api.uri, scope="profile")
    response = client.get("/api/notes/", **bearer(good))
    assert response.status_code == 200 and response.json()["count"] == 0
    wrong = mint_token(user, public_app, resource=RESOURCE, scope="mcp profile")
    refused = client.get("/api/notes/", **bearer(wrong))
    assert refused.status_code == 401 and 'error="invalid_token"' in refused["WWW-Authenticate"]
