"""The JWK Set endpoint (RFC 7517 §5, RFC 8414 ``jwks_uri``): the published public keys of the JWT
access tokens, cacheable, read-only, enough on their own to verify a token."""

from __future__ import annotations

import pytest

from mcp_oauth.models import AccessTokenSigningKey
from mcp_oauth.shared.access_jwt import KeySet, verify_access_token
from tests.support.jwt_access_tokens import RESOURCE, jwt_resource, logged_in  # noqa: F401 - fixtures
from tests.support.oauth_helpers import first_pair

pytestmark = pytest.mark.django_db


def test_the_jwks_and_metadata_publish_the_key(client, jwt_resource):
    metadata = client.get("/.well-known/oauth-authorization-server").json()
    assert metadata["jwks_uri"] == "http://testserver/oauth/jwks"
    response = client.get("/oauth/jwks")
    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=300"
    (jwk,) = response.json()["keys"]
    key = AccessTokenSigningKey.objects.get()
    assert jwk["kid"] == key.kid and jwk["kty"] == "EC" and jwk["crv"] == "P-256" and jwk["use"] == "sig"
    assert "d" not in jwk
    assert client.post("/oauth/jwks").status_code == 405


def test_a_token_verifies_with_the_published_jwks_alone(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    keys = KeySet.from_jwks(logged_in.get("/oauth/jwks").content)
    claims = verify_access_token(token, keys=keys, issuer="http://testserver", audience=RESOURCE)
    assert claims.client_id == public_app.client_id
