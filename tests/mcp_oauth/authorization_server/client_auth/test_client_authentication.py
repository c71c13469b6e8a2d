"""Client authentication at the token, revocation and introspection endpoints (mcp_oauth.authorization_server.client_auth.client_authentication): one method per request, no Bearer challenge on a refused assertion, 401 invalid_client without or with wrong credentials."""

from __future__ import annotations

import base64

import pytest
from oauth2_provider.models import get_access_token_model

from tests.mcp_oauth.authorization_server.client_auth.test_client_assertion import (  # noqa: F401 - fixtures
    ASSERTION_TYPE,
    ISSUER,
    assert_invalid_client,
    cc_request,
    client_claims,
    jwt_client,
    key,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import claims, unsigned


@pytest.mark.django_db
def test_wrong_assertion_type_secret_and_assertion_unknown_client(client, jwt_client, key):
    app, secret = jwt_client
    assert_invalid_client(cc_request(client, key.sign(client_claims(app)), assertion_type="urn:example:saml"))
    both = client.post(
        "/oauth/token",
        {
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": key.sign(client_claims(app)),
            "client_secret": secret,
        },
    )
    assert_invalid_client(both)
    nobody = key.sign(claims(iss="nobody", sub="nobody", aud=ISSUER))
    assert_invalid_client(cc_request(client, nobody))


@pytest.mark.django_db
def test_duplicate_client_assertion_is_invalid_request(client, jwt_client, key):
    app, _ = jwt_client
    assertion = key.sign(client_claims(app))
    body = (
        f"grant_type=client_credentials&client_assertion_type={ASSERTION_TYPE}"
        f"&client_assertion={assertion}&client_assertion={assertion}"
    )
    response = client.post("/oauth/token", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"


@pytest.mark.django_db
def test_revocation_with_private_key_jwt(client, jwt_client, key):
    app, _ = jwt_client
    token = cc_request(client, key.sign(client_claims(app))).json()["access_token"]
    response = client.post(
        "/oauth/revoke",
        {"token": token, "client_assertion_type": ASSERTION_TYPE, "client_assertion": key.sign(client_claims(app))},
    )
    assert response.status_code == 200, response.content
    assert not get_access_token_model().objects.exists()
    refused = client.post(
        "/oauth/revoke", {"token": "x", "client_assertion_type": ASSERTION_TYPE, "client_assertion": unsigned({})}
    )
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"


@pytest.mark.django_db
def test_introspection_with_private_key_jwt(client, jwt_client, key, resource):
    app, _ = jwt_client
    # RFC 7662 §4: a client marked as the resource server of the token's audience (here its own token's)
    app.mcp_profile.resource_server_for.add(resource)
    token = cc_request(client, key.sign(client_claims(app))).json()["access_token"]
    data = {"token": token, "client_assertion_type": ASSERTION_TYPE}
    answer = client.post("/oauth/introspect", {**data, "client_assertion": key.sign(client_claims(app))})
    assert answer.status_code == 200 and answer.json()["active"] is True
    refused = client.post("/oauth/introspect", {**data, "client_assertion": unsigned(client_claims(app))})
    assert refused.status_code == 401  # RFC 7662 §2.3 -> RFC 6749 §5.2
    assert refused.json()["error"] == "invalid_client"
    assert refused["Cache-Control"] == "no-store"
    assert refused["WWW-Authenticate"].startswith("Basic realm=")


@pytest.mark.django_db
def test_introspection_without_or_with_wrong_credentials_is_401_invalid_client(client, jwt_client, key):
    """Missing, unknown or wrong client credentials: 401 invalid_client in JSON with a Basic
    challenge (RFC 7662 §2.3, RFC 6749 §5.2), never DOT's empty 403; a bad bearer token instead:
    401 invalid_token with a Bearer challenge (RFC 6750 §3.1)."""
    app, _ = jwt_client
    token = cc_request(client, key.sign(client_claims(app))).json()["access_token"]
    basic = "Basic " + base64.b64encode(b"nosuchclient:pw").decode()
    for extra in ({}, {"HTTP_AUTHORIZATION": basic}):
        answer = client.post("/oauth/introspect", {"token": token}, **extra)
        assert answer.status_code == 401
        assert answer["Content-Type"] == "application/json"
        assert answer.json()["error"] == "invalid_client"
        assert answer["WWW-Authenticate"].startswith("Basic realm=")
    answer = client.post("/oauth/introspect", {"token": token}, HTTP_AUTHORIZATION="Bearer not-a-token")
    assert answer.status_code == 401
    assert answer.json()["error"] == "invalid_token"
    assert answer["WWW-Authenticate"].startswith("Bearer ") and 'error="invalid_token"' in answer["WWW-Authenticate"]


@pytest.mark.django_db
def test_a_refused_assertion_at_the_token_endpoint_has_no_bearer_challenge(client, jwt_client, key):
    """invalid_client is no RFC 6750 Bearer error: the token endpoint's 401 names the Basic scheme."""
    app, _ = jwt_client
    refused = cc_request(client, unsigned(client_claims(app)))
    assert refused.status_code == 401
    assert refused.json()["error"] == "invalid_client"
    assert refused["WWW-Authenticate"].startswith("Basic realm=")
