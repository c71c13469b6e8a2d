"""DPoP (RFC 9449) at the token endpoint and at /mcp: proofs made with keys generated here, and
the attacks the RFC names, each with its exact error and status."""

from __future__ import annotations

import json
import time

import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.dpop.nonce import new_nonce
from mcp_oauth.dpop.proof import jwk_thumbprint
from mcp_oauth.models import ClientProfile, DPoPBinding
from mcp_oauth.resource_server.cache import access_token_by_checksum, token_checksum
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
ALGS = ["ES256", "ES384", "PS256", "RS256", "EdDSA"]


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


def refresh(client, app, refresh_token: str, proof: str | None = None):
    headers = {"HTTP_DPOP": proof} if proof is not None else {}
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id}
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


# --- metadata ---------------------------------------------------------------------------------


def test_metadata_advertises_dpop(client, resource):
    as_metadata = client.get("/.well-known/oauth-authorization-server").json()
    assert as_metadata["dpop_signing_alg_values_supported"] == ALGS
    prm = client.get("/.well-known/oauth-protected-resource/mcp").json()
    assert prm["dpop_signing_alg_values_supported"] == ALGS
    assert prm["dpop_bound_access_tokens_required"] is False
    resource.dpop_required = True
    resource.save()
    assert client.get("/.well-known/oauth-protected-resource/mcp").json()["dpop_bound_access_tokens_required"] is True


def test_dpop_off_removes_it_from_metadata(client, resource, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_SIGNING_ALG_VALUES_SUPPORTED": []}
    assert "dpop_signing_alg_values_supported" not in client.get("/.well-known/oauth-authorization-server").json()
    assert "dpop_signing_alg_values_supported" not in client.get("/.well-known/oauth-protected-resource/mcp").json()


# --- issuance ---------------------------------------------------------------------------------


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


def test_token_endpoint_refuses_a_replayed_proof(logged_in, public_app, key):
    proof = key.proof("POST", TOKEN_URL)
    assert exchange(logged_in, public_app, proof).status_code == 200
    replay = exchange(logged_in, public_app, proof)
    assert replay.status_code == 400
    assert replay.json() == {
        "error": "invalid_dpop_proof",
        "error_description": "The DPoP proof was used before (jti).",
    }


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


# --- refresh tokens of public clients are bound (§5.4) ---------------------------------------


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


# --- opt-in per client and per resource --------------------------------------------------------


def test_client_that_requires_dpop(logged_in, public_app, key):
    ClientProfile.objects.create(application=public_app, dpop_bound_access_tokens=True)
    refused = exchange(logged_in, public_app)
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_dpop_proof"
    assert exchange(logged_in, public_app, key.proof("POST", TOKEN_URL)).json()["token_type"] == "DPoP"


def test_client_metadata_flag_requires_dpop(logged_in, public_app):
    ClientProfile.objects.create(application=public_app, metadata={"dpop_bound_access_tokens": True})
    refused = exchange(logged_in, public_app)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_dpop_proof")


def test_resource_that_requires_dpop(logged_in, public_app, key, resource, user, mint_token):
    resource.dpop_required = True
    resource.save()
    refused = exchange(logged_in, public_app)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_dpop_proof")
    bearer = mint_token(user, public_app, "mcp", resource.uri)
    response = ping(logged_in, bearer, scheme="Bearer")
    assert response.status_code == 401
    header = response["WWW-Authenticate"]
    assert header.startswith('DPoP resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"')
    assert 'error="invalid_token"' in header and 'algs="ES256 ES384 PS256 RS256 EdDSA"' in header
    assert "Bearer" not in header
    no_token = logged_in.post("/mcp", data=PING, content_type="application/json")
    assert no_token.status_code == 401
    assert no_token["WWW-Authenticate"].startswith("DPoP resource_metadata=")
    body = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL)).json()
    assert ping(logged_in, body["access_token"], key.proof("POST", MCP_URL, body["access_token"])).status_code == 200


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


def test_resource_refuses_a_replayed_proof(logged_in, key, dpop_pair):
    token = dpop_pair["access_token"]
    proof = key.proof("POST", MCP_URL, token)
    assert ping(logged_in, token, proof).status_code == 200
    replay = ping(logged_in, token, proof)
    assert replay.status_code == 401
    assert replay.json()["error_description"] == "The DPoP proof was used before (jti)."


def test_resource_nonce(logged_in, key, dpop_pair, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_NONCE_REQUIRED": True}
    token = dpop_pair["access_token"]
    response = ping(logged_in, token, key.proof("POST", MCP_URL, token))
    assert response.status_code == 401
    assert challenge_error(response) == "use_dpop_nonce"
    nonce = response["DPoP-Nonce"]
    assert ping(logged_in, token, key.proof("POST", MCP_URL, token, nonce=nonce)).status_code == 200


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


def test_dynamic_registration_opts_in(client, user, resource, key):
    """RFC 9449 §5.2 client metadata at RFC 7591 registration."""
    metadata = {
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
        "client_name": "dpop client",
        "dpop_bound_access_tokens": True,
    }
    registered = client.post("/oauth/register", json.dumps(metadata), content_type="application/json")
    assert registered.status_code == 201, registered.content
    assert registered.json()["dpop_bound_access_tokens"] is True
    from oauth2_provider.models import get_application_model

    app = get_application_model().objects.get(client_id=registered.json()["client_id"])
    client.force_login(user)
    refused = exchange(client, app)
    assert (refused.status_code, refused.json()["error"]) == (400, "invalid_dpop_proof")
    assert exchange(client, app, key.proof("POST", TOKEN_URL)).json()["token_type"] == "DPoP"
    bad = client.post(
        "/oauth/register",
        json.dumps({**metadata, "dpop_bound_access_tokens": "yes"}),
        content_type="application/json",
    )
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid_client_metadata"


def test_cimd_document_flag_requires_dpop(db):
    """A Client ID Metadata Document with ``dpop_bound_access_tokens: true`` opts its client in."""
    from oauth2_provider.models import get_application_model

    from mcp_oauth.authorization_server.dpop_requirements import client_requires_dpop
    from mcp_oauth.models import ClientMetadataDocument

    Application = get_application_model()
    url = "https://client.example.com/metadata.json"
    app = Application.objects.create(
        client_id=url, name="cimd", client_type="public", authorization_grant_type="authorization-code"
    )
    document = ClientMetadataDocument.objects.create(
        client_id=url, application=app, document={"client_id": url, "dpop_bound_access_tokens": False}
    )
    assert client_requires_dpop(app) is False
    document.document = {"client_id": url, "dpop_bound_access_tokens": True}
    document.save()
    assert client_requires_dpop(app) is True


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


def test_cleanup_prunes_the_bindings_of_expired_tokens(db):
    from datetime import timedelta

    from django.utils import timezone

    from mcp_oauth.dpop.bindings import bind_tokens
    from mcp_oauth.tasks import cleanup

    now = timezone.now()
    bind_tokens(
        "a" * 43,
        [("old", "access_token", now - timedelta(seconds=1)), ("live", "access_token", now + timedelta(hours=1))],
    )
    assert cleanup()["dpop_bindings"] == 1
    assert list(DPoPBinding.objects.values_list("token_checksum", flat=True)) == [token_checksum("live")]


def test_settings_check(settings):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "DPOP_SIGNING_ALG_VALUES_SUPPORTED": ["ES256", "HS256"],
        "DPOP_PROOF_MAX_AGE_SECONDS": 0,
    }
    ids = [message.id for message in run_checks() if message.id == "mcp_oauth.E095"]
    assert ids == ["mcp_oauth.E095", "mcp_oauth.E095"]


def test_introspection_names_the_key(logged_in, key, dpop_pair, service, mint_token, user, public_app, resource):
    """RFC 9449 §6.2: an introspected DPoP-bound token says ``token_type: DPoP`` and ``cnf.jkt``."""
    from mcp_oauth.models import ClientProfile
    from tests.support.oauth_helpers import basic

    app, secret = service
    # RFC 7662 §4: only the resource server of the token's audience learns about it
    ClientProfile.objects.create(application=app).resource_server_for.add(resource)
    auth = {"HTTP_AUTHORIZATION": basic(app.client_id, secret)}
    bound = logged_in.post("/oauth/introspect", {"token": dpop_pair["access_token"]}, **auth)
    assert bound.status_code == 200, bound.content
    assert bound.json()["active"] is True
    assert bound.json()["token_type"] == "DPoP"
    assert bound.json()["cnf"] == {"jkt": key.thumbprint}
    plain = logged_in.post("/oauth/introspect", {"token": mint_token(user, public_app, "mcp", resource.uri)}, **auth)
    assert plain.json()["active"] is True
    assert "cnf" not in plain.json()


def test_cors_lets_browser_clients_send_proofs_and_read_nonces(client, resource):
    for path in ("/mcp", "/oauth/token"):
        response = client.options(path, HTTP_ORIGIN="http://localhost:3000", HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST")
        assert "DPoP" in [h.strip() for h in response["Access-Control-Allow-Headers"].split(",")]


def test_htu_in_either_loopback_spelling(client, settings, user, public_app, mint_token):
    """On a loopback development site the proof may name the URL in the spelling the client used
    (mcp_oauth.shared.origins); ``BASE_URL``'s spelling is always the request URL (behind a proxy too)."""
    from datetime import timedelta

    from django.utils import timezone

    from mcp_oauth.dpop.bindings import bind_tokens
    from mcp_oauth.signals import ensure_default_resource

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://127.0.0.1:8000"}
    resource = ensure_default_resource()
    key = DPoPKey()
    token = mint_token(user, public_app, "mcp", resource.uri)
    bind_tokens(key.thumbprint, [(token, "access_token", timezone.now() + timedelta(hours=1))])
    host = {"HTTP_HOST": "localhost:8000"}
    for htu, status in (
        ("http://localhost:8000/mcp", 200),
        ("http://127.0.0.1:8000/mcp", 200),
        ("http://LOCALHOST:8000/mcp?x=1#f", 200),  # case-insensitive host, no query or fragment
        ("http://localhost:8001/mcp", 401),
        ("https://localhost:8000/mcp", 401),
        ("http://example.com:8000/mcp", 401),
    ):
        response = client.post(
            "/mcp",
            data=PING,
            content_type="application/json",
            HTTP_AUTHORIZATION=f"DPoP {token}",
            HTTP_DPOP=key.proof("POST", htu, token),
            HTTP_ACCEPT="application/json, text/event-stream",
            HTTP_MCP_PROTOCOL_VERSION="2026-07-28",
            HTTP_MCP_METHOD="server/discover",
            **host,
        )
        assert response.status_code == status, (htu, response.content)
