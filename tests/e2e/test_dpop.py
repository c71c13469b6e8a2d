"""DPoP end to end on loopback: a real ASGI server (the reference site, lean lanes included), the
official Python SDK client (``mcp`` 2.3.0, which signs no DPoP proofs) speaking through the test's
DPoP auth flow, and a replayed proof refused by a second worker process that
shares only Redis and the database with the first."""

from __future__ import annotations

import asyncio
import os
import secrets

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.dpop_helpers import DPoPAuth, DPoPKey
from tests.support.live import free_port, run_asgi_server
from tests.support.oauth_helpers import live_code_tokens
from tests.support.topology import REDIS_URL, database_url, require_postgres_and_redis, start_uvicorn

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _dpop_tokens(base: str, key: DPoPKey, user) -> dict:
    """Authorization code from the consent flow, exchanged at the live token endpoint with a DPoP proof."""
    body, _ = live_code_tokens(base, user, key, name="dpop e2e")
    assert body["token_type"] == "DPoP"
    return body


@pytest.fixture
def live(settings, django_user_model):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    ensure_default_resource()
    user = django_user_model.objects.create_user("dpop", "dpop@example.com", "pw-" + secrets.token_hex(4))
    from project.asgi import application

    with run_asgi_server(application, port) as url:
        yield url, user


async def _sdk_calls(mcp_url: str, auth: httpx2.Auth, mode: str) -> list:
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http), mode=mode) as client:
            return [await client.call_tool("echo", {"text": f"dpop {i}"}) for i in range(3)]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_official_python_client_calls_tools_with_dpop(live, mode):
    base, user = live
    key = DPoPKey()
    tokens = _dpop_tokens(base, key, user)
    results = asyncio.run(_sdk_calls(base + "/mcp", DPoPAuth(key, tokens["access_token"]), mode))
    assert [result.content[0].text for result in results] == ["dpop 0", "dpop 1", "dpop 2"]
    # the stolen token: the thief's own key, or no key at all
    thief = DPoPKey()
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    body = '{"jsonrpc":"2.0","id":1,"method":"ping"}'
    for auth_headers in (
        {
            "Authorization": f"DPoP {tokens['access_token']}",
            "DPoP": thief.proof("POST", base + "/mcp", tokens["access_token"]),
        },
        {"Authorization": f"Bearer {tokens['access_token']}"},
    ):
        refused = httpx2.post(base + "/mcp", content=body, headers={**headers, **auth_headers})
        assert refused.status_code == 401
        assert "DPoP " in refused.headers["WWW-Authenticate"]


def test_nonce_round_trip_through_the_auth_flow(live, settings):
    base, user = live
    key = DPoPKey()
    tokens = _dpop_tokens(base, key, user)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DPOP_NONCE_REQUIRED": True}
    auth = DPoPAuth(key, tokens["access_token"])
    results = asyncio.run(_sdk_calls(base + "/mcp", auth, "2026-07-28"))
    assert len(results) == 3
    assert auth.nonce  # learnt from the use_dpop_nonce challenge, then sent in every proof


def test_replayed_proof_is_refused_by_another_worker(settings, django_user_model):
    """Worker A (this process) accepts a proof; worker B (its own uvicorn process, same Redis and
    database, same BASE_URL) refuses the same proof as a replay."""
    require_postgres_and_redis()
    port_a, port_b = free_port(), free_port()
    base = f"http://127.0.0.1:{port_a}"
    prefix = "dpop-" + secrets.token_hex(4)
    settings.CACHES = {
        "default": {"BACKEND": "mcp_oauth.shared.redis_cache.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": prefix}
    }
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    ensure_default_resource()
    user = django_user_model.objects.create_user("dpop2", "dpop2@example.com", "pw")
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": REDIS_URL,
        "CACHE_KEY_PREFIX": prefix,
        "MCP_BASE_URL": base,
        "DJANGO_DEBUG": "1",
    }
    env.pop("CELERY_BROKER_URL", None)
    worker_b = start_uvicorn(port_b, env)
    try:
        from project.asgi import application

        with run_asgi_server(application, port_a):
            key = DPoPKey()
            token = _dpop_tokens(base, key, user)["access_token"]
            proof = key.proof("POST", base + "/mcp", token)
            headers = {
                "Authorization": f"DPoP {token}",
                "DPoP": proof,
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2025-11-25",
            }
            init = (
                '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
                '"capabilities":{},"clientInfo":{"name":"r","version":"1"}}}'
            )
            first = httpx2.post(base + "/mcp", content=init, headers=headers)
            assert first.status_code == 200, first.text
            replay = httpx2.post(f"http://127.0.0.1:{port_b}/mcp", content=init, headers=headers)
            assert replay.status_code == 401, replay.text
            assert 'error="invalid_dpop_proof"' in replay.headers["WWW-Authenticate"]
            assert replay.json()["error_description"] == "The DPoP proof was used before (jti)."
            fresh = httpx2.post(
                f"http://127.0.0.1:{port_b}/mcp",
                content=init,
                headers={**headers, "DPoP": key.proof("POST", base + "/mcp", token)},
            )
            assert fresh.status_code == 200, fresh.text
    finally:
        worker_b.terminate()
        worker_b.wait(timeout=10)
