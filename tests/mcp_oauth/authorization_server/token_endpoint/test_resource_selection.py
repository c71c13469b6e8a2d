"""Which protected resource a token is for (mcp_oauth.authorization_server.token_endpoint.resource_selection, RFC 8707): the requested one, the default (never unrestricted), other spellings of it, invalid_target for a foreign one, two, or a switch."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model, get_grant_model

from mcp_oauth.models import ProtectedResource
from tests.mcp_oauth.authorization_server.test_views import (
    ISSUER,
    RESOURCE,
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


def test_token_bound_to_requested_resource(logged_in, public_app):
    code, verifier, query = get_code(logged_in, public_app, resource=RESOURCE)
    assert query["iss"] == ISSUER
    response = token_request(logged_in, public_app, code, verifier, resource=RESOURCE)
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["token_type"] == "Bearer" and body["refresh_token"]
    token = get_access_token_model().objects.get()
    assert token.resource == [RESOURCE]


def test_no_resource_binds_default_never_unrestricted(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    assert get_grant_model().objects.get().resource == [RESOURCE]
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 200
    assert get_access_token_model().objects.get().resource == [RESOURCE]


@pytest.mark.parametrize(
    "spelling",
    ["HTTP://TESTSERVER/mcp", "http://testserver:80/mcp", "http://TestServer/mcp/", "http://testserver/mcp/"],
)
def test_other_spellings_of_the_resource_are_the_resource(logged_in, public_app, spelling):
    code, verifier, _ = get_code(logged_in, public_app, resource=spelling)
    response = token_request(logged_in, public_app, code, verifier, resource=spelling)
    assert response.status_code == 200, response.content
    assert get_access_token_model().objects.get().resource == [RESOURCE]


@pytest.mark.parametrize(
    "foreign",
    [
        "https://evil.example/mcp",
        "http://testserver/other",
        "http://testserver/mcp#frag",
        "http://testserver:8080/mcp",
        "https://testserver/mcp",
        "not a uri",
        "urn:example:mcp",
    ],
)
def test_foreign_resource_at_authorize_is_invalid_target(logged_in, public_app, foreign):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, resource=foreign)
    response = logged_in.get("/oauth/authorize?" + urlencode(params))
    query = redirect_query(response)
    assert query["error"] == "invalid_target"
    assert query["state"] == params["state"]
    assert query["iss"] == ISSUER


def test_two_resources_are_invalid_target(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    params["resource"] = [RESOURCE, "http://testserver/mcp2"]
    ProtectedResource.objects.create(uri="http://testserver/mcp2", scopes="mcp")
    response = logged_in.get("/oauth/authorize?" + urlencode(params, doseq=True))
    assert redirect_query(response)["error"] == "invalid_target"


def test_foreign_resource_at_token_is_invalid_target(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, verifier, resource="https://evil.example/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"
    assert response["Cache-Control"] == "no-store"


def test_token_cannot_switch_to_another_registered_resource(logged_in, public_app):
    ProtectedResource.objects.create(uri="http://testserver/tenant/mcp", scopes="mcp")
    code, verifier, _ = get_code(logged_in, public_app, resource=RESOURCE)
    response = token_request(logged_in, public_app, code, verifier, resource="http://testserver/tenant/mcp")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_target"


def test_refresh_to_another_resource_is_invalid_target(logged_in, public_app):
    ProtectedResource.objects.create(uri="http://testserver/tenant/mcp", scopes="mcp")
    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    response = logged_in.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": first["refresh_token"],
            "client_id": public_app.client_id,
            "resource": "http://testserver/tenant/mcp",
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"
