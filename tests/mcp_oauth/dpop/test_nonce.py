"""Server-provided DPoP nonces (mcp_oauth.dpop.nonce, RFC 9449 §8, §9) at the token endpoint and the resource server."""

from __future__ import annotations

from mcp_oauth.dpop.nonce import new_nonce, nonce_valid
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


def test_token_endpoint_nonce(logged_in, public_app, key, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_NONCE_REQUIRED": True}
    response = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL))
    assert response.status_code == 400
    assert response.json()["error"] == "use_dpop_nonce"
    nonce = response["DPoP-Nonce"]
    assert nonce == new_nonce()
    wrong = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL, nonce="made-up"))
    assert (wrong.status_code, wrong.json()["error"]) == (400, "use_dpop_nonce")
    good = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL, nonce=nonce))
    assert good.status_code == 200, good.content
    assert good.json()["token_type"] == "DPoP"


def test_resource_nonce(logged_in, key, dpop_pair, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_NONCE_REQUIRED": True}
    token = dpop_pair["access_token"]
    response = ping(logged_in, token, key.proof("POST", MCP_URL, token))
    assert response.status_code == 401
    assert challenge_error(response) == "use_dpop_nonce"
    nonce = response["DPoP-Nonce"]
    assert ping(logged_in, token, key.proof("POST", MCP_URL, token, nonce=nonce)).status_code == 200


def test_nonces_of_a_secret_key_in_the_fallbacks_are_accepted(settings):
    """A SECRET_KEY rotated host by host: the nonce of a host that promoted the new key is valid on
    a host that holds it as a fallback (and the other way round), not on a host without it."""
    old, new = "old-secret-" + "o" * 40, "new-secret-" + "n" * 40
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = new, [old]
    promoted = new_nonce(now=1_000_000.0)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old, [new]
    not_yet = new_nonce(now=1_000_000.0)
    assert promoted != not_yet
    assert nonce_valid(promoted, now=1_000_000.0)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = new, [old]
    assert nonce_valid(not_yet, now=1_000_000.0)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = old, []
    assert not nonce_valid(promoted, now=1_000_000.0)
    assert nonce_valid(not_yet, now=1_000_000.0)
