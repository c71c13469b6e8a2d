"""DPoP at the token endpoint (mcp_oauth.authorization_server.token_endpoint.dpop): the token bound to the proof key, Bearer without a proof, public clients' refresh tokens bound, confidential clients' not."""

from __future__ import annotations

import pytest

from mcp_oauth.dpop.proof import jwk_thumbprint
from mcp_oauth.models import DPoPBinding
from mcp_oauth.resource_server.cache import access_token_by_checksum, token_checksum
from tests.mcp_oauth.dpop.test_proof import (  # noqa: F401 - fixtures
    MCP_URL,
    META,
    PING,
    TOKEN_URL,
    challenge_error,
    dpop_pair,
    exchange,
    key,
    logged_in,
    ping,
)
from tests.support.dpop_helpers import DPoPKey
from tests.support.oauth_helpers import REDIRECT_URI


def refresh(client, app, refresh_token: str, proof: str | None = None):
    headers = {"HTTP_DPOP": proof} if proof is not None else {}
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id}
    return client.post("/oauth/token", data, **headers)


@pytest.mark.parametrize("alg", ["ES256", "ES384", "PS256", "RS256", "EdDSA"])
def test_token_is_bound_to_the_proof_key(logged_in, public_app, alg):
    key = DPoPKey(alg)
    response = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "DPoP"
    access = DPoPBinding.objects.get(token_checksum=token_checksum(body["access_token"]))
    assert access.jkt == key.thumbprint == jwk_thumbprint(key.jwk)  # RFC 7638, checked against jwcrypto
    assert access.token_kind == "access_token"
    refresh_row = DPoPBinding.objects.get(token_checksum=token_checksum(body["refresh_token"]))
    assert (refresh_row.jkt, refresh_row.token_kind) == (key.thumbprint, "refresh_token")  # public client: §5.4
    # the token cache entry carries cnf.jkt
    assert access_token_by_checksum(token_checksum(body["access_token"])).dpop_jkt == key.thumbprint
    ok = ping(logged_in, body["access_token"], key.proof("POST", MCP_URL, body["access_token"]))
    assert ok.status_code == 200, ok.content
    assert "result" in ok.json()


def test_without_a_proof_the_token_stays_bearer(logged_in, public_app):
    body = exchange(logged_in, public_app).json()
    assert body["token_type"] == "Bearer"
    assert not DPoPBinding.objects.exists()
    assert ping(logged_in, body["access_token"], scheme="Bearer").status_code == 200
    refused = ping(logged_in, body["access_token"], DPoPKey().proof("POST", MCP_URL, body["access_token"]))
    assert refused.status_code == 401
    assert challenge_error(refused) == "invalid_token"


def test_confidential_client_refresh_token_is_not_bound(logged_in, key, resource):
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    app = Application(
        name="conf",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris=REDIRECT_URI,
    )
    secret = app.client_secret
    app.save()
    response = exchange(logged_in, app, key.proof("POST", TOKEN_URL), client_secret=secret)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "DPoP"
    assert DPoPBinding.objects.filter(token_kind="access_token").count() == 1
    assert not DPoPBinding.objects.filter(token_kind="refresh_token").exists()


def test_bound_refresh_token(logged_in, public_app, key, dpop_pair):
    stolen = refresh(logged_in, public_app, dpop_pair["refresh_token"], DPoPKey().proof("POST", TOKEN_URL))
    assert stolen.status_code == 400
    assert stolen.json()["error"] == "invalid_grant"
    bare = refresh(logged_in, public_app, dpop_pair["refresh_token"])
    assert (bare.status_code, bare.json()["error"]) == (400, "invalid_grant")
    good = refresh(logged_in, public_app, dpop_pair["refresh_token"], key.proof("POST", TOKEN_URL))
    assert good.status_code == 200, good.content
    body = good.json()
    assert body["token_type"] == "DPoP"
    assert DPoPBinding.objects.get(token_checksum=token_checksum(body["refresh_token"])).jkt == key.thumbprint
    assert ping(logged_in, body["access_token"], key.proof("POST", MCP_URL, body["access_token"])).status_code == 200
