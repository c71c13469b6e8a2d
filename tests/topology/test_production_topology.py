"""The production shape on PostgreSQL + Redis with separate worker processes.

* Revocation, user deactivation and a disabled resource stop working at once on *every*
  worker (two uvicorn processes sharing the Redis cache), although both had the token and the
  resource cached.
* Overload: a worker whose pool holds 2 connections, hit by 20 concurrent requests while the
  database is stalled, answers only 200 or 503 with Retry-After — never 500, never a dropped
  connection.

Skipped unless DATABASE_URL names PostgreSQL and Redis answers (DB 6, see tests/support/topology.py).
"""

from __future__ import annotations

import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx2
import psycopg
import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.resource_server.cache import TOKEN_PREFIX, token_checksum
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.topology import asgi_worker, database_url, redis_cache_settings, require_postgres_and_redis

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "topology", "version": "1"}},
}


def headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }


@pytest.fixture
def shared(settings):
    """Base URL, cache prefix, and this process on the workers' Redis cache (its signals reach them)."""
    require_postgres_and_redis()
    prefix = "topo-" + secrets.token_hex(4)
    settings.CACHES = redis_cache_settings(prefix)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    yield port, base, prefix
    from django.core.cache import cache

    cache.clear()


def statuses(urls: list[str], token: str) -> list[int]:
    return [httpx2.post(url, headers=headers(token), json=INIT, timeout=10).status_code for url in urls]


def test_revocation_deactivation_and_disabled_resource_reach_both_workers(
    shared, user, other_user, public_app, mint_token
):
    from django.core.cache import cache

    port_a, base, prefix = shared
    port_b = free_port()
    resource = ensure_default_resource()
    revoked = mint_token(user, public_app, "mcp", resource.uri)
    deactivated = mint_token(other_user, public_app, "mcp", resource.uri)
    kept = mint_token(user, public_app, "mcp", resource.uri)
    urls = [f"{base}/mcp", f"http://127.0.0.1:{port_b}/mcp"]
    with asgi_worker(port_a, base, prefix), asgi_worker(port_b, base, prefix):
        for token in (revoked, deactivated, kept):
            assert statuses(urls, token) == [200, 200]
            assert cache.get(TOKEN_PREFIX + token_checksum(token)) is not None  # cached by the workers

        get_access_token_model().objects.get(token_checksum=token_checksum(revoked)).revoke()
        assert statuses(urls, revoked) == [401, 401]

        other_user.is_active = False
        other_user.save()
        assert statuses(urls, deactivated) == [401, 401]
        assert statuses(urls, kept) == [200, 200]

        resource.enabled = False
        resource.save()
        assert statuses(urls, kept) == [404, 404]
        resource.enabled = True
        resource.save()
        assert statuses(urls, kept) == [200, 200]


def test_a_session_deleted_on_one_worker_is_404_on_the_other_at_once(shared, user, public_app, mint_token):
    """Both workers serve the session from the shared session cache; DELETE on one ends it on both."""
    from django.core.cache import cache

    from mcp_oauth.mcp_server.transport.sessions import SESSION_PREFIX

    port_a, base, prefix = shared
    port_b = free_port()
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    urls = [f"{base}/mcp", f"http://127.0.0.1:{port_b}/mcp"]
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    with asgi_worker(port_a, base, prefix), asgi_worker(port_b, base, prefix):
        opened = httpx2.post(urls[0], headers=headers(token), json=INIT, timeout=10)
        session = {
            **headers(token),
            "Mcp-Session-Id": opened.headers["mcp-session-id"],
            "MCP-Protocol-Version": "2025-11-25",
        }
        assert [httpx2.post(url, headers=session, json=ping, timeout=10).status_code for url in urls] == [200, 200]
        assert cache.get(SESSION_PREFIX + opened.headers["mcp-session-id"])["user_id"] == user.pk
        assert httpx2.delete(urls[0], headers=session, timeout=10).status_code == 204
        assert [httpx2.post(url, headers=session, json=ping, timeout=10).status_code for url in urls] == [404, 404]


def test_pool_of_two_under_twenty_concurrent_requests_answers_only_200_or_503(shared, user, public_app, mint_token):
    port, base, prefix = shared
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    pool = {
        "DB_POOL_MIN_SIZE": "1",
        "DB_POOL_MAX_SIZE": "2",
        "DB_POOL_TIMEOUT": "0.2",
        "DB_STATEMENT_TIMEOUT_MS": "1000",
    }
    results: list[httpx2.Response] = []
    lock = threading.Lock()

    def call(_: int) -> None:
        response = httpx2.post(f"{base}/mcp", headers=headers(token), json=INIT, timeout=30)
        with lock:
            results.append(response)

    with asgi_worker(port, base, prefix, **pool):
        # Stall the database: the token table is locked, so the first requests hold both pooled
        # connections while they wait (cancelled after statement_timeout) and the others wait
        # for the pool (PoolTimeout): both are 503 + Retry-After.
        with psycopg.connect(database_url(), autocommit=False) as stall:
            stall.execute("LOCK TABLE oauth2_provider_accesstoken IN ACCESS EXCLUSIVE MODE")
            with ThreadPoolExecutor(20) as executor:
                futures = [executor.submit(call, n) for n in range(20)]
                time.sleep(2.5)  # past the statement timeout: the stalled queries are cancelled too
                stall.rollback()  # the database recovers
                for future in futures:
                    future.result()  # a dropped connection would raise here
        codes = sorted(response.status_code for response in results)
        assert len(codes) == 20
        assert set(codes) <= {200, 503}, codes
        assert codes.count(503) >= 10, codes  # the stalled pool of two could not serve the others
        for response in results:
            if response.status_code == 503:
                assert response.headers["Retry-After"] == "2"
                assert response.json()["error"] == "temporarily_unavailable"
        # afterwards the same worker serves everyone again
        with ThreadPoolExecutor(20) as executor:
            after = list(
                executor.map(
                    lambda _: httpx2.post(f"{base}/mcp", headers=headers(token), json=INIT, timeout=30).status_code,
                    range(20),
                )
            )
        assert set(after) <= {200, 503}
        assert after.count(200) >= 1


def test_statement_timeout_answers_503_not_500(shared, user, public_app, mint_token):
    """A database slower than statement_timeout: 503 + Retry-After."""
    port, base, prefix = shared
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    with asgi_worker(port, base, prefix, DB_STATEMENT_TIMEOUT_MS="300"):
        with psycopg.connect(database_url(), autocommit=False) as stall:
            stall.execute("LOCK TABLE oauth2_provider_accesstoken IN ACCESS EXCLUSIVE MODE")
            response = httpx2.post(f"{base}/mcp", headers=headers(token), json=INIT, timeout=30)
            stall.rollback()
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"] == "2"
        assert httpx2.post(f"{base}/mcp", headers=headers(token), json=INIT, timeout=30).status_code == 200


def test_a_deleted_or_denied_client_is_refused_by_both_workers_at_once(shared):
    """Both workers keep the client and the trust rules in memory (token lane, client cache);
    a change saved here reaches them through the shared generation."""
    import base64

    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import TrustRule

    port_a, base, prefix = shared
    port_b = free_port()
    ensure_default_resource()
    Application = get_application_model()
    denied = Application(name="svc-a", client_type="confidential", authorization_grant_type="client-credentials")
    denied_secret = denied.client_secret
    denied.save()
    deleted = Application(name="svc-b", client_type="confidential", authorization_grant_type="client-credentials")
    deleted_secret = deleted.client_secret
    deleted.save()
    urls = [f"{base}/oauth/token", f"http://127.0.0.1:{port_b}/oauth/token"]

    def grants(client_id: str, secret: str) -> list[int]:
        basic = "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()
        return [
            httpx2.post(
                url, headers={"Authorization": basic}, data={"grant_type": "client_credentials"}, timeout=10
            ).status_code
            for url in urls
        ]

    plain_http = {"DJANGO_SECURE_SSL_REDIRECT": "0"}  # else the token endpoint redirects to https
    with asgi_worker(port_a, base, prefix, **plain_http), asgi_worker(port_b, base, prefix, **plain_http):
        assert grants(denied.client_id, denied_secret) == [200, 200]
        assert grants(deleted.client_id, deleted_secret) == [200, 200]
        TrustRule.objects.create(target=TrustRule.Target.CLIENT, pattern=denied.client_id, action=TrustRule.Action.DENY)
        assert grants(denied.client_id, denied_secret) == [401, 401]
        Application.objects.get(pk=deleted.pk).delete()
        assert grants(deleted.client_id, deleted_secret) == [401, 401]
