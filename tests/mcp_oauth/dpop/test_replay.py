"""A DPoP proof is accepted once (mcp_oauth.dpop.replay, RFC 9449 §11.1): a replay is refused at the token endpoint and at the resource server."""

from __future__ import annotations

from tests.mcp_oauth.dpop.test_proof import MCP_URL, META, PING, TOKEN_URL, dpop_pair, exchange, key, logged_in, ping  # noqa: F401 - fixtures


def test_token_endpoint_refuses_a_replayed_proof(logged_in, public_app, key):
    proof = key.proof("POST", TOKEN_URL)
    assert exchange(logged_in, public_app, proof).status_code == 200
    replay = exchange(logged_in, public_app, proof)
    assert replay.status_code == 400
    assert replay.json() == {
        "error": "invalid_dpop_proof",
        "error_description": "The DPoP proof was used before (jti).",
    }


def test_resource_refuses_a_replayed_proof(logged_in, key, dpop_pair):
    token = dpop_pair["access_token"]
    proof = key.proof("POST", MCP_URL, token)
    assert ping(logged_in, token, proof).status_code == 200
    replay = ping(logged_in, token, proof)
    assert replay.status_code == 401
    assert replay.json()["error_description"] == "The DPoP proof was used before (jti)."
