"""End to end: the official MCP TypeScript SDK 2.x client does the OAuth itself, against the live server.

``@modelcontextprotocol/client`` 2.4.0 (pinned in ``tests/js/package.json`` and its lockfile) runs
``tests/js/oauth_client.mjs`` in Node, in both protocol eras (``versionNegotiation`` ``"legacy"``:
``initialize`` and a 2025-11-25 session; ``{pin: "2026-07-28"}``: ``server/discover``, stateless):

* the authorization code flow of its ``OAuthClientProvider``: the 401 challenge, RFC 9728 and
  RFC 8414 discovery, dynamic registration (RFC 7591), the authorization request with PKCE and
  ``resource``; the test logs in and consents with a real HTTP session (the site's own pages) and
  hands the redirect back to the SDK's ``finishAuth`` (which checks ``iss``, RFC 9207); then a
  refresh after the access token expired;
* the same with the SDK's DPoP support (``OAuthClientProvider.dpop()`` → ``DpopSession``, RFC 9449)
  at a resource that requires DPoP, with and without server nonces (RFC 9449 §8, §9);
* ``ClientCredentialsProvider`` (``client_secret_basic``) and ``PrivateKeyJwtProvider`` (RFC 7523
  §2.2, the key set registered for the client);
* ``CrossAppAccessProvider`` (the enterprise-managed authorization extension): the SDK obtains the
  ID-JAG from a loopback IdP by RFC 8693 token exchange (discovered by RFC 8414), then redeems it
  with the jwt-bearer grant (RFC 7523 §2.1) at our token endpoint.

Without Node.js or the installed client the tests skip; under ``CI=true`` they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlencode

import httpx2
import jwt
import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import (
    AuditEvent,
    ClientProfile,
    DPoPBinding,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    McpSession,
    ProtectedResource,
)
from tests.e2e.test_python_sdk import PASSWORD, USERNAME, live  # noqa: F401 - live is a fixture
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import claims, make_key
from tests.support.live import HeadlessBrowser, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

JS_DIR = Path(__file__).resolve().parents[1] / "js"
SCRIPT = JS_DIR / "oauth_client.mjs"
CLIENT_VERSION = "2.4.0"
CLIENT_PACKAGE_JSON = JS_DIR / "node_modules" / "@modelcontextprotocol" / "client" / "package.json"
ERAS = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}
NODE_TIMEOUT = 120
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
#: Access-token lifetime in the refresh tests: long enough for the first session on a loaded
#: machine, after which the client pauses half a second longer than that.
TOKEN_SECONDS = 4


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str):
    if _under_ci():
        pytest.fail(f"CI: {reason}", pytrace=False)
    pytest.skip(reason)


def _installed_version() -> str | None:
    try:
        return json.loads(CLIENT_PACKAGE_JSON.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="session")
def node() -> str:
    """``node`` (≥ 20) with the pinned 2.x client installed in ``tests/js`` (``make js-install``)."""
    node = shutil.which("node") or ("/usr/bin/node" if os.access("/usr/bin/node", os.X_OK) else None)
    if node is None:
        _unavailable("Node.js is not installed: the TypeScript SDK OAuth tests need `node` (and `npm`)")
    if _installed_version() != CLIENT_VERSION:
        _unavailable(
            f"@modelcontextprotocol/client {CLIENT_VERSION} is not installed in tests/js: run `make js-install`"
        )
    return node


def _callback_url(redirect_url: str, params: dict[str, str]) -> str:
    return f"{redirect_url}?{urlencode(params)}"


async def _log_in_and_consent(base: str, url: str) -> tuple[dict[str, str], list[str]]:
    browser = HeadlessBrowser(base, USERNAME, PASSWORD)
    try:
        params = await browser.authorize(url)
        return params, browser.consent_pages
    finally:
        await browser.aclose()


UserAgent = Callable[[str], tuple[dict[str, str], list[str]]]


def run_node(
    node: str,
    base: str,
    config: dict,
    user_agent: UserAgent | None = None,
    expect_error: bool = False,
    sdk_warnings: bool = False,
) -> tuple[dict, list[dict]]:
    """Run the Node client with ``config``; play the user's browser for each authorization request.

    ``user_agent(url) -> (redirect query, consent pages)`` logs in and consents; by default a real
    HTTP session with cookies (:class:`tests.support.live.HeadlessBrowser`). Returns the client's report and,
    per authorization, ``{"url", "params", "consent_pages"}``. With ``expect_error`` the client
    must have failed (its errors are in ``report["errors"]``); with ``sdk_warnings`` the SDK may warn
    on stderr (``report["stderr"]``: a refused refresh it recovers from by authorizing again)."""
    if user_agent is None:

        def user_agent(url: str) -> tuple[dict[str, str], list[str]]:
            return asyncio.run(_log_in_and_consent(base, url))

    authorizations: list[dict] = []
    with tempfile.TemporaryFile(mode="w+") as stderr:
        process = subprocess.Popen(
            [node, str(SCRIPT), json.dumps(config)],
            cwd=JS_DIR,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        watchdog = threading.Timer(NODE_TIMEOUT, process.kill)
        watchdog.start()
        report = None
        try:
            assert process.stdout is not None and process.stdin is not None
            for line in process.stdout:
                if not line.startswith("{"):
                    continue
                message = json.loads(line)
                if message.get("event") == "authorize":
                    params, consent_pages = user_agent(message["url"])
                    authorizations.append({"url": message["url"], "params": params, "consent_pages": consent_pages})
                    callback = _callback_url(config["redirectUrl"], params)
                    process.stdin.write(json.dumps({"callback": callback}) + "\n")
                    process.stdin.flush()
                elif message.get("event") == "report":
                    report = message
            process.wait(timeout=30)
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
        stderr.seek(0)
        errors = stderr.read()
    assert report is not None, f"no report from the Node client (exit {process.returncode}):\n{errors}"
    assert report["sdkVersion"] == CLIENT_VERSION
    report["stderr"] = errors
    if expect_error:
        assert report["errors"], report
    else:
        assert report["errors"] == [], "\n".join(report["errors"]) + "\n" + errors
        # the SDK warns on stderr when it falls back (a failed refresh, a missing issuer binding...)
        assert sdk_warnings or "[mcp-sdk]" not in errors, errors
    return report, authorizations


def assert_era(report: dict, era: str) -> None:
    assert report["protocolVersion"] == ERAS[era]
    rpcs = [e["rpc"] for e in report["exchanges"] if e["path"] == "/mcp" and e["rpc"]]
    calls = [e for e in report["exchanges"] if e["rpc"] == "tools/call"]
    if era == "legacy":
        assert "initialize" in rpcs and "server/discover" not in rpcs
        assert calls and all(e["session"] for e in calls)  # Mcp-Session-Id of the 2025-11-25 session
    else:
        assert rpcs[0] == "server/discover" and "initialize" not in rpcs
        assert not any(e["session"] for e in report["exchanges"])
        assert not McpSession.objects.exists()


def whoami_results(report: dict) -> list[dict]:
    assert report["calls"], report
    for call in report["calls"]:
        assert call["isError"] is False, call
    return [call["structured"] for call in report["calls"]]


def auth_code_config(live, era: str, **extra) -> dict:
    return {
        "mcpUrl": live.mcp_url,
        "era": era,
        "flow": "authorization_code",
        "redirectUrl": f"http://127.0.0.1:{free_port()}/callback",
        "clientName": "TypeScript SDK e2e client",
        **extra,
    }


# --- authorization code + PKCE --------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_authorization_code_flow_with_registration_and_refresh(node, live, settings, era):
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "ACCESS_TOKEN_EXPIRE_SECONDS": TOKEN_SECONDS,
        "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
    }
    report, authorizations = run_node(
        node, live.base, auth_code_config(live, era, againAfterMs=TOKEN_SECONDS * 1000 + 500, calls=2)
    )
    assert_era(report, era)

    # 401 -> RFC 9728 -> RFC 8414 -> RFC 7591 -> one authorization -> code exchange -> /mcp.
    walk = [(e["method"], e["path"], e["status"]) for e in report["exchanges"]]
    assert walk[0] == ("POST", "/mcp", 401)
    steps = [
        ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", "/.well-known/oauth-authorization-server", 200),
        ("POST", "/oauth/register", 201),
        ("POST", "/oauth/token", 200),
    ]
    positions = [walk.index(step) for step in steps]
    assert positions == sorted(positions)
    grants = [e["grantType"] for e in report["exchanges"] if e["path"] == "/oauth/token"]
    assert grants == ["authorization_code", "refresh_token"]
    assert report["authorizations"] == 1 and len(authorizations) == 1
    (authorization,) = authorizations
    assert "code_challenge_method=S256" in authorization["url"] and "resource=" in authorization["url"]
    assert authorization["params"]["iss"] == live.base  # RFC 9207, checked by finishAuth
    assert "TypeScript SDK e2e client" in authorization["consent_pages"][0]

    first, second, third, fourth = whoami_results(report)
    assert first == second and third == fourth
    assert first["user"] == USERNAME and first["machine"] is False
    assert first["resource"] == live.mcp_url
    # the SDK asks for offline_access because our metadata lists it (MCP 2026-07-28 "Refresh tokens")
    assert first["scopes"] == third["scopes"] == ["mcp", "offline_access"]
    client_id = first["client_id"]
    application = get_application_model().objects.get(client_id=client_id)
    assert application.registration_source == "dcr" and application.client_type == "public"
    # the second session refreshed on the expired token's 401 (no second consent) and rotated it
    assert [c["label"] for c in report["calls"]] == ["first", "first", "again", "again"]
    assert report["tokenTypes"] == ["Bearer", "Bearer"]
    # the refresh rotated the pair: only the new access token is left, still bound to the resource
    (token,) = get_access_token_model().objects.filter(application=application, user__username=USERNAME)
    assert token.resource == [live.mcp_url]
    assert not any(e["status"] >= 500 for e in report["exchanges"])


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("nonces", [False, True], ids=["no-nonce", "nonce"])
def test_dpop_authorization_code_flow_at_a_resource_that_requires_dpop(node, live, settings, era, nonces):
    resource = ProtectedResource.objects.default()
    resource.dpop_required = True
    resource.save()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_NONCE_REQUIRED": nonces}
    report, _ = run_node(node, live.base, auth_code_config(live, era, dpop=True, calls=2))
    assert_era(report, era)
    for result in whoami_results(report):
        assert result["user"] == USERNAME and result["resource"] == live.mcp_url

    # the AS issued a DPoP-bound token (RFC 9449 §5) bound to the SDK's key (cnf.jkt, §6)
    assert report["tokenTypes"] == ["DPoP"]
    token = get_access_token_model().objects.get(user__username=USERNAME)
    binding = DPoPBinding.objects.get(token_kind=DPoPBinding.Kind.ACCESS_TOKEN)
    assert binding.jkt == report["dpopThumbprint"] and binding.token_checksum == token.token_checksum

    token_requests = [e for e in report["exchanges"] if e["path"] == "/oauth/token"]
    assert all(e["dpop"] and e["dpop"]["htm"] == "POST" and not e["dpop"]["ath"] for e in token_requests)
    assert token_requests[-1]["status"] == 200
    # every authorized /mcp request carries the DPoP scheme and a proof with ath (RFC 9449 §7.1)
    authorized = [e for e in report["exchanges"] if e["path"] == "/mcp" and e["scheme"]]
    assert authorized and all(e["scheme"] == "DPoP" and e["dpop"]["ath"] for e in authorized)
    assert all(e["dpop"]["htu"] == live.mcp_url for e in authorized)
    assert all(e["status"] in (200, 202, 401) for e in authorized)
    if nonces:
        # §8: the token endpoint's use_dpop_nonce (400) retried once with the nonce;
        # §9: the resource's use_dpop_nonce (401) retried once, and the nonce kept for later requests
        assert [e["status"] for e in token_requests] == [400, 200]
        assert token_requests[0]["error"] == "use_dpop_nonce" and token_requests[1]["dpop"]["nonce"]
        # the AS and the RS share the origin (one DpopSession nonce slot per origin) and every
        # nonce this server issues is good at both, so /mcp needs no challenge of its own
        assert all(e["dpop"]["nonce"] for e in authorized)
        assert all(e["status"] != 401 for e in authorized)
    else:
        assert [e["status"] for e in token_requests] == [200]
        assert all(e["status"] != 401 for e in authorized)
        assert not any(e["dpop"]["nonce"] for e in authorized)

    # the token the SDK holds is useless without its key: as a Bearer token, or with a replayed proof
    mcp_headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ping = '{"jsonrpc":"2.0","id":1,"method":"ping"}'
    as_bearer = httpx2.post(
        live.mcp_url, content=ping, headers={**mcp_headers, "Authorization": f"Bearer {report['accessToken']}"}
    )
    assert as_bearer.status_code == 401 and 'error="invalid_token"' in as_bearer.headers["WWW-Authenticate"]
    replayed = httpx2.post(
        live.mcp_url,
        content=ping,
        headers={
            **mcp_headers,
            "Authorization": f"DPoP {report['accessToken']}",
            "DPoP": authorized[-1]["dpop"]["raw"],
        },
    )
    assert replayed.status_code == 401, replayed.text
    assert 'error="invalid_dpop_proof"' in replayed.headers["WWW-Authenticate"]
    assert replayed.json()["error_description"] == "The DPoP proof was used before (jti)."


def _require_dpop_at_the_resource() -> None:
    resource = ProtectedResource.objects.default()
    resource.dpop_required = True
    resource.save()


def _mcp_requests(report: dict) -> list[dict]:
    return [e for e in report["exchanges"] if e["path"] == "/mcp" and e["scheme"]]


@pytest.mark.parametrize("era", ERAS)
def test_dpop_chosen_by_the_client_at_a_resource_that_does_not_require_it(node, live, era):
    """DPoP is opt-in (RFC 9449 §5): a proof at the token endpoint gets a bound token even where the
    resource also accepts bearer tokens, and /mcp then refuses it without the SDK's proof."""
    assert ProtectedResource.objects.default().dpop_required is False
    report, _ = run_node(node, live.base, auth_code_config(live, era, dpop=True))
    assert_era(report, era)
    (result,) = whoami_results(report)
    assert result["user"] == USERNAME
    assert report["tokenTypes"] == ["DPoP"]
    assert DPoPBinding.objects.filter(jkt=report["dpopThumbprint"]).exists()
    assert all(e["scheme"] == "DPoP" for e in _mcp_requests(report))
    as_bearer = httpx2.post(
        live.mcp_url,
        content='{"jsonrpc":"2.0","id":1,"method":"ping"}',
        headers={
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": f"Bearer {report['accessToken']}",
        },
    )
    assert as_bearer.status_code == 401 and 'error="invalid_token"' in as_bearer.headers["WWW-Authenticate"]


@pytest.mark.parametrize("era", ERAS)
def test_dpop_bound_refresh_token_is_refreshed_with_the_sdks_key(node, live, settings, era):
    """RFC 9449 §5: a public client's refresh token is bound to its key; the SDK signs the refresh
    request with the same DpopSession and gets a new DPoP-bound pair."""
    _require_dpop_at_the_resource()
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "ACCESS_TOKEN_EXPIRE_SECONDS": TOKEN_SECONDS,
        "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
    }
    report, authorizations = run_node(
        node, live.base, auth_code_config(live, era, dpop=True, againAfterMs=TOKEN_SECONDS * 1000 + 500)
    )
    assert_era(report, era)
    assert len(authorizations) == 1 and report["tokenTypes"] == ["DPoP", "DPoP"]
    assert [c["label"] for c in report["calls"]] == ["first", "again"]
    assert all(r["user"] == USERNAME for r in whoami_results(report))
    token_requests = [e for e in report["exchanges"] if e["path"] == "/oauth/token"]
    assert [(e["grantType"], e["status"]) for e in token_requests] == [
        ("authorization_code", 200),
        ("refresh_token", 200),
    ]
    assert all(e["dpop"] for e in token_requests)
    # the expired token's 401 carried the DPoP challenge the SDK answered by refreshing
    expired = [e for e in _mcp_requests(report) if e["status"] == 401]
    assert expired and all(e["scheme"] == "DPoP" and "DPoP " in e["error"] for e in expired)
    bindings = DPoPBinding.objects.filter(jkt=report["dpopThumbprint"])
    assert {b.token_kind for b in bindings} >= {DPoPBinding.Kind.ACCESS_TOKEN}
    (token,) = get_access_token_model().objects.filter(user__username=USERNAME)
    assert bindings.filter(token_checksum=token.token_checksum).exists()


@pytest.mark.parametrize("era", ERAS)
def test_stale_dpop_nonce_at_the_resource_is_challenged_and_retried(node, live, settings, era):
    """RFC 9449 §9: the resource answers a proof with an outdated nonce 401 ``use_dpop_nonce`` and a
    fresh ``DPoP-Nonce``; the SDK retries once with a new proof carrying it."""
    _require_dpop_at_the_resource()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_NONCE_REQUIRED": True, "DPOP_NONCE_LIFETIME_SECONDS": 1}
    report, _ = run_node(node, live.base, auth_code_config(live, era, dpop=True, againAfterMs=3000))
    assert_era(report, era)
    assert report["tokenTypes"] == ["DPoP"]  # the token outlived the pause: no refresh
    assert [c["label"] for c in report["calls"]] == ["first", "again"]
    mcp = _mcp_requests(report)
    challenged = [i for i, e in enumerate(mcp) if e["status"] == 401]
    assert challenged, mcp
    for i in challenged:
        assert 'error="use_dpop_nonce"' in mcp[i]["error"] and mcp[i]["nonceAnswered"]
        retry = mcp[i + 1]
        assert retry["status"] in (200, 202) and retry["dpop"]["nonce"] == mcp[i]["nonceAnswered"]
        assert retry["dpop"]["nonce"] != mcp[i]["dpop"]["nonce"]


@pytest.mark.parametrize("era", ERAS)
def test_client_id_metadata_document_instead_of_registration(node, live, cimd_env, era):
    """With ``clientMetadataUrl`` and ``client_id_metadata_document_supported`` in our metadata, the
    SDK sends the document's URL as client_id (no registration); the server fetches the document."""
    client_id = cimd_env.publish("/ts-client.json", client_name="TypeScript CIMD client")
    report, authorizations = run_node(node, live.base, auth_code_config(live, era, clientMetadataUrl=client_id))
    assert_era(report, era)
    (result,) = whoami_results(report)
    assert result["user"] == USERNAME and result["client_id"] == client_id
    assert not any(e["path"] == "/oauth/register" for e in report["exchanges"])
    assert "TypeScript CIMD client" in authorizations[0]["consent_pages"][0]
    application = get_application_model().objects.get(client_id=client_id)
    assert application.registration_source == "cimd"
    assert len(cimd_env.server.fetches("/ts-client.json")) == 1


def test_auto_negotiation_behind_the_401_settles_on_2026_07_28(node, live):
    """``versionNegotiation: {mode: "auto"}``: the ``server/discover`` probe meets the 401 first; after
    the OAuth flow the probe succeeds and the client speaks 2026-07-28 (no ``initialize``)."""
    report, authorizations = run_node(node, live.base, auth_code_config(live, "auto"))
    assert report["protocolVersion"] == "2026-07-28"
    rpcs = [e["rpc"] for e in report["exchanges"] if e["path"] == "/mcp" and e["rpc"]]
    assert rpcs[0] == "server/discover" and "initialize" not in rpcs
    assert len(authorizations) == 1
    (result,) = whoami_results(report)
    assert result["user"] == USERNAME
    assert not McpSession.objects.exists()


# --- machine clients ---------------------------------------------------------------------------


def machine_client(**profile) -> tuple[object, str]:
    Application = get_application_model()
    app = Application(name="ts machine", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    if profile:
        ClientProfile.objects.create(application=app, **profile)
    return app, secret


def assert_machine_token(report: dict, app, live) -> None:
    for result in whoami_results(report):
        assert result["user"] is None and result["machine"] is True
        assert result["client_id"] == app.client_id and result["scopes"] == ["mcp"]
    token = get_access_token_model().objects.get(application=app)
    assert token.user is None and token.resource == [live.mcp_url]
    walk = [(e["method"], e["path"], e["status"]) for e in report["exchanges"]]
    assert walk[0] == ("POST", "/mcp", 401)
    assert ("POST", "/oauth/token", 200) in walk and ("POST", "/oauth/register", 201) not in walk


@pytest.mark.parametrize("era", ERAS)
def test_client_credentials_provider(node, live, era):
    app, secret = machine_client()
    config = {
        "mcpUrl": live.mcp_url,
        "era": era,
        "flow": "client_credentials",
        "clientId": app.client_id,
        "clientSecret": secret,
        "scope": "mcp",
        "issuer": live.base,
    }
    report, _ = run_node(node, live.base, config)
    assert_era(report, era)
    assert_machine_token(report, app, live)
    assert [e["grantType"] for e in report["exchanges"] if e["path"] == "/oauth/token"] == ["client_credentials"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("alg", ["ES256", "RS256", "PS256"])
def test_private_key_jwt_provider(node, live, era, alg):
    key = make_key(alg)
    app, _ = machine_client(jwks=key.jwks)
    config = {
        "mcpUrl": live.mcp_url,
        "era": era,
        "flow": "private_key_jwt",
        "clientId": app.client_id,
        "privateKeyPem": key.private_pem,
        "alg": alg,
        "scope": "mcp",
        "issuer": live.base,
    }
    report, _ = run_node(node, live.base, config)
    assert_era(report, era)
    assert_machine_token(report, app, live)
    # RFC 7523 §3: iss = sub = client_id, aud = our issuer, a jti, signed with the registered key
    (token_request,) = [e for e in report["exchanges"] if e["path"] == "/oauth/token"]
    assertion = token_request["clientAssertion"]
    assert jwt.get_unverified_header(assertion)["alg"] == alg
    payload = jwt.decode(assertion, key.private.public_key(), algorithms=[alg], audience=live.base)
    assert payload["iss"] == payload["sub"] == app.client_id and payload["jti"]
    # the SDK's assertion, replayed by whoever saw it, is refused (its jti was used)
    replay = httpx2.post(
        live.base + "/oauth/token",
        data={
            "grant_type": "client_credentials",
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": assertion,
        },
    )
    assert replay.status_code == 401 and replay.json()["error"] == "invalid_client"
    assert "replay" in replay.json()["error_description"]
    assert get_access_token_model().objects.filter(application=app).count() == 1


@pytest.mark.parametrize("era", ERAS)
def test_client_credentials_provider_with_dpop_at_a_resource_that_requires_it(node, live, era):
    """The machine providers have no ``dpop()`` of their own; a host that implements it gets a
    DPoP-bound client-credentials token (RFC 9449 §5) and proofs at /mcp."""
    _require_dpop_at_the_resource()
    app, secret = machine_client()
    config = {
        "mcpUrl": live.mcp_url,
        "era": era,
        "flow": "client_credentials",
        "clientId": app.client_id,
        "clientSecret": secret,
        "scope": "mcp",
        "issuer": live.base,
        "dpop": True,
    }
    report, _ = run_node(node, live.base, config)
    assert_era(report, era)
    assert_machine_token(report, app, live)
    assert report["tokenTypes"] == ["DPoP"]
    token = get_access_token_model().objects.get(application=app)
    binding = DPoPBinding.objects.get(token_checksum=token.token_checksum)
    assert binding.jkt == report["dpopThumbprint"]
    assert all(e["scheme"] == "DPoP" and e["dpop"]["ath"] for e in _mcp_requests(report))


@pytest.mark.parametrize("era", ERAS)
def test_sdk_client_without_dpop_at_a_resource_that_requires_it_is_refused_cleanly(node, live, era):
    """A provider without ``dpop()`` at a DPoP-only resource: the token request without a proof is a
    400 ``invalid_dpop_proof`` (RFC 9449 §5), no token is issued, the SDK surfaces the OAuth error."""
    _require_dpop_at_the_resource()
    app, secret = machine_client()
    config = {
        "mcpUrl": live.mcp_url,
        "era": era,
        "flow": "client_credentials",
        "clientId": app.client_id,
        "clientSecret": secret,
        "scope": "mcp",
        "issuer": live.base,
    }
    report, _ = run_node(node, live.base, config, expect_error=True)
    token_requests = [(e["status"], e["error"]) for e in report["exchanges"] if e["path"] == "/oauth/token"]
    # the SDK retries an OAuth error of the token endpoint once (and says so), then gives up
    assert token_requests == [(400, "invalid_dpop_proof")] * 2
    assert '[mcp-sdk] OAuth "invalid_dpop_proof" — retrying authorization' in report["stderr"]
    assert report["errors"][0].startswith(
        "OAuthError: The resource accepts only DPoP-bound access tokens: send a DPoP proof."
    )
    assert not get_access_token_model().objects.filter(application=app).exists()
    assert not report["calls"] and not any(e["status"] >= 500 for e in report["exchanges"])
    # the 401 that started it said so: a DPoP challenge only, no Bearer one (RFC 9449 §7.1)
    first = report["exchanges"][0]
    assert first["status"] == 401 and first["error"].startswith("DPoP ") and "Bearer" not in first["error"]


# --- cross-app access (ID-JAG) -------------------------------------------------------------------


class LoopbackIdP:
    """An enterprise IdP on loopback: RFC 8414 metadata and an RFC 8693 token endpoint that exchanges
    an ID token it issued for an ID-JAG (the enterprise-managed authorization extension)."""

    def __init__(self, key, mcp_client_id: str, token_exchange_only: bool = False) -> None:
        self.key = key
        self.mcp_client_id = mcp_client_id
        self.token_exchange_only = token_exchange_only
        self.client_id, self.client_secret = "chat-app", "idp-secret-" + os.urandom(6).hex()
        self.exchanges: list[dict] = []
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def metadata(self) -> dict:
        """RFC 8414 §2 metadata. ``authorization_endpoint`` is REQUIRED "unless no grant types are
        supported that use the authorization endpoint": ``token_exchange_only`` leaves it out."""
        if self.token_exchange_only:
            return {
                "issuer": self.url,
                "token_endpoint": self.url + "/token",
                "response_types_supported": [],
                "grant_types_supported": ["urn:ietf:params:oauth:grant-type:token-exchange"],
            }
        return {
            "issuer": self.url,
            "authorization_endpoint": self.url + "/authorize",
            "token_endpoint": self.url + "/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "urn:ietf:params:oauth:grant-type:token-exchange"],
        }

    def id_token(self, subject: str) -> str:
        return self.key.sign(claims(iss=self.url, sub=subject, aud=self.client_id), typ="JWT")

    def handle_token(self, form: dict[str, str]) -> tuple[int, dict]:
        self.exchanges.append(form)
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange":
            return 400, {"error": "unsupported_grant_type"}
        if (form.get("client_id"), form.get("client_secret")) != (self.client_id, self.client_secret):
            return 401, {"error": "invalid_client"}
        if form.get("requested_token_type") != ID_JAG_TYPE:
            return 400, {"error": "invalid_request"}
        if form.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token":
            return 400, {"error": "invalid_request"}
        try:
            id_token = jwt.decode(
                form.get("subject_token", ""),
                self.key.private.public_key(),
                algorithms=[self.key.alg],
                audience=self.client_id,
                issuer=self.url,
            )
        except jwt.PyJWTError:
            return 400, {"error": "invalid_grant"}
        payload = claims(
            iss=self.url,
            sub=id_token["sub"],
            aud=form.get("audience"),
            resource=form.get("resource"),
            client_id=self.mcp_client_id,
            scope=form.get("scope") or "mcp",
        )
        jag = self.key.sign(payload, typ="oauth-id-jag+jwt")
        return 200, {"issued_token_type": ID_JAG_TYPE, "access_token": jag, "token_type": "N_A", "expires_in": 300}

    @contextmanager
    def serving(self):
        idp = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/.well-known/oauth-authorization-server":
                    self._answer(200, idp.metadata)
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
                self._answer(*idp.handle_token(form) if self.path == "/token" else (404, {"error": "not_found"}))

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        thread = threading.Thread(target=server.serve_forever, name="loopback-idp", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("dpop", [False, True], ids=["bearer", "dpop"])
def test_cross_app_access_provider_with_a_loopback_idp(node, live, era, dpop):
    """The ID-JAG from the IdP's RFC 8693 exchange, redeemed with the jwt-bearer grant; with
    ``dpop()`` on the provider, at a resource that requires DPoP, the token is DPoP-bound."""
    if dpop:
        _require_dpop_at_the_resource()
    idp, config, app, user = cross_app_setup(live, era)
    secret = config["clientSecret"]
    config["dpop"] = dpop
    with idp.serving():
        report, _ = run_node(node, live.base, config)
    assert_era(report, era)
    for result in whoami_results(report):
        assert result["user"] == USERNAME and result["machine"] is False and result["client_id"] == app.client_id
    # the SDK asked the IdP for an ID-JAG for our issuer and the MCP resource (RFC 8693 §2.1)
    (exchange,) = idp.exchanges
    assert exchange["audience"] == live.base and exchange["resource"] == live.mcp_url
    assert report["idJagRequests"] == [
        {"audience": live.base, "resource": live.mcp_url, "scope": exchange.get("scope")}
    ]
    token_requests = [e for e in report["exchanges"] if e["path"] == "/oauth/token"]
    assert [(e["grantType"], e["status"]) for e in token_requests] == [
        ("urn:ietf:params:oauth:grant-type:jwt-bearer", 200)
    ]
    assert token_requests[0]["scheme"] == "Basic"  # client_secret_basic, as the provider declares
    token = get_access_token_model().objects.get(application=app)
    assert token.user == user and token.resource == [live.mcp_url]
    # the ID-JAG the SDK redeemed, replayed by whoever saw it (even with the client's secret): invalid_grant
    replay = httpx2.post(
        live.base + "/oauth/token",
        data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": token_requests[0]["assertion"]},
        auth=(app.client_id, secret),
    )
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ASSERTION_REPLAYED).exists()
    assert report["tokenTypes"] == (["DPoP"] if dpop else ["Bearer"])
    assert DPoPBinding.objects.filter(token_checksum=token.token_checksum).exists() is dpop
    assert all(e["scheme"] == ("DPoP" if dpop else "Bearer") for e in _mcp_requests(report))


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason=(
        "SDK 2.4.0: discoverAndRequestJwtAuthGrant validates the IdP's RFC 8414 metadata with a schema "
        "that requires authorization_endpoint, which RFC 8414 §2 makes optional when no grant type "
        "uses the authorization endpoint (a token-exchange-only IdP); ZodError before any exchange"
    ),
)
def test_sdk_discovers_a_token_exchange_only_idp(node, live):
    """Reproducer of an SDK bug (the server is not involved): a strict xfail, so it fails once fixed."""
    idp, config, _app, _user = cross_app_setup(live, "2026-07-28", token_exchange_only=True)
    with idp.serving():
        report, _ = run_node(node, live.base, config)
    assert len(idp.exchanges) == 1


def cross_app_setup(live, era: str, token_exchange_only: bool = False):
    """An IdP on loopback trusted for a confidential client and the default resource; the user
    ``demo`` linked to its subject ``U-demo``; the Node config of the cross-app flow."""
    idp_key = make_key("RS256")
    app, secret = machine_client()
    user = get_user_model().objects.get(username=USERNAME)
    idp = LoopbackIdP(idp_key, app.client_id, token_exchange_only=token_exchange_only)
    row = EnterpriseIdentityProvider.objects.create(name="Acme (loopback)", issuer=idp.url, jwks=idp_key.jwks)
    row.allowed_clients.add(app)
    row.allowed_resources.add(ProtectedResource.objects.default())
    EnterpriseIdentity.objects.create(provider=row, subject="U-demo", user=user)
    config = {
        "mcpUrl": live.mcp_url,
        "era": era,
        "flow": "cross_app",
        "clientId": app.client_id,
        "clientSecret": secret,
        "issuer": live.base,
        "idp": {
            "url": idp.url,
            "idToken": idp.id_token("U-demo"),
            "clientId": idp.client_id,
            "clientSecret": idp.client_secret,
        },
    }
    return idp, config, app, user
