"""DPoP (RFC 9449) at the token endpoint and at /mcp: proofs made with keys generated here, and
the attacks the RFC names, each with its exact error and status."""

from __future__ import annotations

import json
import time

import pytest
from oauth2_provider.models import get_access_token_model

from tests.support.dpop_helpers import DPoPKey, b64url, unsigned_proof
from tests.support.oauth_helpers import REDIRECT_URI, get_code

TOKEN_URL = "http://testserver/oauth/token"
MCP_URL = "http://testserver/mcp"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}})
INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
)


@pytest.fixture
def key():
    return DPoPKey("ES256")


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


def exchange(client, app, proof: str | None = None, **extra):
    code, verifier, _ = get_code(client, app)
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": app.client_id,
        "code_verifier": verifier,
        **extra,
    }
    headers = {"HTTP_DPOP": proof} if proof is not None else {}
    return client.post("/oauth/token", data, **headers)


def ping(client, token: str, proof: str | None = None, scheme: str = "DPoP", path: str = "/mcp"):
    headers = {
        "HTTP_AUTHORIZATION": f"{scheme} {token}",
        "HTTP_ACCEPT": "application/json, text/event-stream",
        "HTTP_MCP_PROTOCOL_VERSION": "2026-07-28",
        "HTTP_MCP_METHOD": "server/discover",
    }
    if proof is not None:
        headers["HTTP_DPOP"] = proof
    return client.post(path, data=PING, content_type="application/json", **headers)


@pytest.fixture
def dpop_pair(logged_in, public_app, key):
    response = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL))
    assert response.status_code == 200, response.content
    return response.json()


def challenge_error(response) -> str:
    header = response["WWW-Authenticate"]
    dpop = header[header.index("DPoP ") :]
    return dpop.split('error="', 1)[1].split('"', 1)[0]


# --- the token endpoint refuses bad proofs -----------------------------------------------------


def _token_attacks(key: DPoPKey) -> dict[str, str]:
    now = time.time()
    other = DPoPKey()
    private_jwk = {**key.jwk, "d": b64url(key.private.private_numbers().private_value.to_bytes(32, "big"))}
    return {
        "wrong method": key.proof("GET", TOKEN_URL),
        "wrong url": key.proof("POST", "http://testserver/oauth/revoke"),
        "other host": key.proof("POST", "https://evil.example/oauth/token"),
        "stale iat": key.proof("POST", TOKEN_URL, iat=now - 3600),
        "future iat": key.proof("POST", TOKEN_URL, iat=now + 3600),
        "wrong typ": key.proof("POST", TOKEN_URL, headers={"typ": "JWT"}),
        "alg none": unsigned_proof(
            {"typ": "dpop+jwt", "alg": "none", "jwk": key.jwk},
            {"jti": "x", "htm": "POST", "htu": TOKEN_URL, "iat": int(now)},
        ),
        "HS256": unsigned_proof(
            {"typ": "dpop+jwt", "alg": "HS256", "jwk": key.jwk},
            {"jti": "x", "htm": "POST", "htu": TOKEN_URL, "iat": int(now)},
            b"\x00" * 32,
        ),
        "private key in jwk": key.proof("POST", TOKEN_URL, headers={"jwk": private_jwk}),
        "symmetric jwk": key.proof("POST", TOKEN_URL, headers={"jwk": {"kty": "oct", "k": "c2VjcmV0"}}),
        "jwk of another key": key.proof("POST", TOKEN_URL, headers={"jwk": other.jwk}),
        "no jwk": unsigned_proof({"typ": "dpop+jwt", "alg": "ES256"}, {"jti": "x"}),
        "no jti": key.proof("POST", TOKEN_URL, claims={"jti": None}),
        "garbage": "not-a-jwt",
        "two proofs": key.proof("POST", TOKEN_URL) + "," + key.proof("POST", TOKEN_URL),
    }


@pytest.mark.parametrize("attack", list(_token_attacks(DPoPKey())))
def test_token_endpoint_refuses_bad_proofs(logged_in, public_app, key, attack):
    response = exchange(logged_in, public_app, _token_attacks(key)[attack])
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_dpop_proof"
    assert response["Cache-Control"] == "no-store"
    assert not get_access_token_model().objects.exists()


# --- the resource server ----------------------------------------------------------------------


def test_bound_token_as_bearer_is_refused(logged_in, dpop_pair):
    response = ping(logged_in, dpop_pair["access_token"], scheme="Bearer")
    assert response.status_code == 401
    header = response["WWW-Authenticate"]
    # the Bearer challenge keeps resource_metadata (RFC 9728), the error goes in the DPoP one
    assert header.startswith('Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"')
    assert challenge_error(response) == "invalid_token"
    assert response.json()["error"] == "invalid_token"


def test_stolen_token_without_the_key(logged_in, dpop_pair):
    token = dpop_pair["access_token"]
    response = ping(logged_in, token, DPoPKey().proof("POST", MCP_URL, token))
    assert response.status_code == 401
    assert challenge_error(response) == "invalid_dpop_proof"
    assert 'algs="ES256 ES384 PS256 RS256 EdDSA"' in response["WWW-Authenticate"]
    assert ping(logged_in, token).status_code == 401  # and without any proof


def _resource_attacks(key: DPoPKey, token: str) -> dict[str, str | None]:
    now = time.time()
    return {
        "no proof": None,
        "wrong method": key.proof("GET", MCP_URL, token),
        "other url": key.proof("POST", "http://testserver/oauth/token", token),
        "query is not the url": key.proof("POST", "http://testserver/other?x=/mcp", token),
        "ath mismatch": key.proof("POST", MCP_URL, token + "x"),
        "no ath": key.proof("POST", MCP_URL),
        "stale iat": key.proof("POST", MCP_URL, token, iat=now - 301),
        "future iat": key.proof("POST", MCP_URL, token, iat=now + 120),
        "wrong typ": key.proof("POST", MCP_URL, token, headers={"typ": "jwt"}),
        "alg none": unsigned_proof(
            {"typ": "dpop+jwt", "alg": "none", "jwk": key.jwk},
            {"jti": "n", "htm": "POST", "htu": MCP_URL, "iat": int(now)},
        ),
        "HS256 with the public key": unsigned_proof(
            {"typ": "dpop+jwt", "alg": "HS256", "jwk": key.jwk},
            {"jti": "h", "htm": "POST", "htu": MCP_URL, "iat": int(now)},
            b"\x01" * 32,
        ),
        "bad signature": key.proof("POST", MCP_URL, token)[:-6] + "AAAAAA",
    }


@pytest.mark.parametrize("attack", list(_resource_attacks(DPoPKey(), "t")))
def test_resource_refuses_bad_proofs(logged_in, key, dpop_pair, attack):
    token = dpop_pair["access_token"]
    response = ping(logged_in, token, _resource_attacks(key, token)[attack])
    assert response.status_code == 401, response.content
    assert challenge_error(response) == "invalid_dpop_proof"
    assert response.json()["error"] == "invalid_dpop_proof"


def test_malformed_dpop_credentials(logged_in, resource):
    response = ping(logged_in, "not a token", DPoPKey().proof("POST", MCP_URL))
    assert response.status_code == 401
    assert challenge_error(response) == "invalid_token"


def test_2025_11_25_era_path(logged_in, key, dpop_pair):
    """The session era (initialize, then Mcp-Session-Id) goes through the same check."""
    token = dpop_pair["access_token"]
    headers = {"HTTP_AUTHORIZATION": f"DPoP {token}", "HTTP_ACCEPT": "application/json, text/event-stream"}
    ok = logged_in.post(
        "/mcp", INIT, content_type="application/json", HTTP_DPOP=key.proof("POST", MCP_URL, token), **headers
    )
    assert ok.status_code == 200, ok.content
    assert ok.json()["result"]["protocolVersion"] == "2025-11-25"
    stolen = logged_in.post(
        "/mcp", INIT, content_type="application/json", HTTP_DPOP=DPoPKey().proof("POST", MCP_URL, token), **headers
    )
    assert stolen.status_code == 401
    assert challenge_error(stolen) == "invalid_dpop_proof"


@pytest.mark.urls("tests.support.urls")
def test_decorator_and_drf_protection(logged_in, key, dpop_pair):
    """``require_bearer`` and ``MCPBearerAuthentication`` make the same DPoP checks (htu: their own URL)."""
    token = dpop_pair["access_token"]
    plain = "http://testserver/api/plain"
    ok = logged_in.get("/api/plain", HTTP_AUTHORIZATION=f"DPoP {token}", HTTP_DPOP=key.proof("GET", plain, token))
    assert ok.status_code == 200, ok.content
    assert ok.json()["user"] == "alice"
    wrong_url = logged_in.get(
        "/api/plain", HTTP_AUTHORIZATION=f"DPoP {token}", HTTP_DPOP=key.proof("GET", MCP_URL, token)
    )
    assert wrong_url.status_code == 401
    assert challenge_error(wrong_url) == "invalid_dpop_proof"
    notes = "http://testserver/api/notes"
    stolen = logged_in.get(
        "/api/notes", HTTP_AUTHORIZATION=f"DPoP {token}", HTTP_DPOP=DPoPKey().proof("GET", notes, token)
    )
    assert stolen.status_code == 401
    assert challenge_error(stolen) == "invalid_dpop_proof"
    as_bearer = logged_in.get("/api/notes", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert as_bearer.status_code == 401
    assert challenge_error(as_bearer) == "invalid_token"
    # a valid proof passes authentication; the view's own scope is missing: 403 in a DPoP challenge
    scoped = logged_in.get("/api/notes", HTTP_AUTHORIZATION=f"DPoP {token}", HTTP_DPOP=key.proof("GET", notes, token))
    assert scoped.status_code == 403
    assert challenge_error(scoped) == "insufficient_scope"


def test_settings_check(settings):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "DPOP_SIGNING_ALG_VALUES_SUPPORTED": ["ES256", "HS256"],
        "DPOP_PROOF_MAX_AGE_SECONDS": 0,
    }
    ids = [message.id for message in run_checks() if message.id == "mcp_oauth.E095"]
    assert ids == ["mcp_oauth.E095", "mcp_oauth.E095"]
