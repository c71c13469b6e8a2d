"""The form guards of the OAuth endpoints (mcp_oauth.authorization_server.token_endpoint.guards): reserved
parameter names refused before oauthlib reads them as the validator's own state."""

from __future__ import annotations

import pytest

from mcp_oauth.authorization_server.token_endpoint.guards import RESERVED_PREFIXES

pytestmark = pytest.mark.django_db


def test_reserved_prefixes():
    assert RESERVED_PREFIXES == ("_", "mcp_")


@pytest.mark.parametrize("endpoint", ["/oauth/token", "/oauth/revoke", "/oauth/introspect"])
@pytest.mark.parametrize("name", ["_mcp_grant_event", "_x", "mcp_organization_id"])
def test_a_reserved_parameter_is_invalid_request(client, resource, public_app, endpoint, name):
    response = client.post(endpoint, {"grant_type": "client_credentials", "client_id": public_app.client_id, name: "1"})
    assert response.status_code == 400, (endpoint, response.status_code, response.content)
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "A parameter name is reserved by this server.",
    }
    assert response["Cache-Control"] == "no-store"


def test_a_reserved_name_in_the_query_string_too(client, resource, public_app):
    response = client.post("/oauth/token?_mcp_assertion_resource=x", {"grant_type": "client_credentials"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


def test_ordinary_names_pass(client, resource, public_app):
    response = client.post("/oauth/token", {"grant_type": "client_credentials", "client_id": public_app.client_id})
    assert response.json()["error"] == "unauthorized_client"  # the grant's own answer, not the guard's
