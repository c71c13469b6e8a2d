"""What the authorization server metadata says about JWT assertions (mcp_oauth.authorization_server.enterprise_identity.assertion_metadata): private_key_jwt and its algorithms; forbidden algorithms stay forbidden whatever the settings."""

from __future__ import annotations

import pytest

from mcp_oauth.authorization_server.client_auth.assertions import AssertionRefused, verify_assertion
from tests.mcp_oauth.authorization_server.client_auth.test_client_assertion import (  # noqa: F401 - fixtures
    ISSUER,
    client_claims,
    jwt_client,
    key,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import hs256_with_public_key


@pytest.mark.django_db
def test_metadata_advertises_private_key_jwt_and_algorithms(client):
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert "private_key_jwt" in data["token_endpoint_auth_methods_supported"]
    assert "client_secret_basic" in data["token_endpoint_auth_methods_supported"]
    algs = data["token_endpoint_auth_signing_alg_values_supported"]
    assert {"RS256", "ES256", "PS256", "EdDSA"} <= set(algs)
    assert not {"none", "HS256", "HS384", "HS512"} & set(algs)
    assert "urn:ietf:params:oauth:grant-type:jwt-bearer" in data["grant_types_supported"]
    assert "client_credentials" in data["grant_types_supported"]


@pytest.mark.django_db
def test_forbidden_algorithms_stay_forbidden_whatever_the_settings(jwt_client, key, settings):
    app, _ = jwt_client
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ASSERTION_ALGORITHMS": ["RS256", "HS256", "none"]}
    with pytest.raises(AssertionRefused) as refused:
        verify_assertion(hs256_with_public_key(key, client_claims(app)), key.jwks["keys"], audiences=[ISSUER])
    assert refused.value.reason == "alg"
