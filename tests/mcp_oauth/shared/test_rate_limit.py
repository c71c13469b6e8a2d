"""Per-client rate limits of the MCP endpoint: token buckets in Redis (one Lua script) or in
process (mcp_oauth.shared.rate_limit), answered 429 + Retry-After with a JSON-RPC error
(mcp_oauth.mcp_server.transport.admission), overridable per client by the adapter."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
from django.core.asgi import get_asgi_application

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.mcp_server.transport.asgi import McpLane
from mcp_oauth.shared import rate_limit
from mcp_oauth.shared.rate_limit import RateLimit, retry_after_seconds, take
from mcp_oauth.signals import request_shed
from tests.support.asgi_client import asgi_call
from tests.support.topology import REDIS_URL, require_redis

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"


# --- the bucket shape -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ({"rate": 10, "burst": 20}, RateLimit(10.0, 20)),
        ({"rate": 2.5}, RateLimit(2.5, 3)),
        ({"rate": 0.1}, RateLimit(0.1, 1)),
        (5, RateLimit(5.0, 5)),
        (RateLimit(1.0, 1), RateLimit(1.0, 1)),
    ],
)
def test_parse(value, expected):
    assert RateLimit.parse(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"rate": 0},
        {"rate": -1},
        {"rate": 1, "burst": 0},
        {"rate": 1, "burst": 1.5},
        {"burst": 3},
        "10/s",
        True,
        {"rate": 1, "x": 1},
    ],
)
def test_parse_refuses(value):
    with pytest.raises(ValueError):
        RateLimit.parse(value)


def test_retry_after_is_whole_seconds_at_least_one():
    assert [retry_after_seconds(w) for w in (0.0, 0.01, 1.0, 1.01, 3.999)] == [1, 1, 1, 2, 4]


# --- in-process buckets -----------------------------------------------------------------------


def test_local_bucket_takes_burst_then_refills_at_rate(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(rate_limit.time, "monotonic", lambda: clock[0])
    buckets = rate_limit.LocalBuckets()
    limit = RateLimit(2.0, 3)
    assert [buckets.take("c", limit) for _ in range(3)] == [None, None, None]
    assert buckets.take("c", limit) == pytest.approx(0.5)  # empty: one token back in 1/rate s
    assert buckets.take("other", limit) is None  # buckets are per name
    clock[0] += 0.5
    assert buckets.take("c", limit) is None
    assert buckets.take("c", limit) == pytest.approx(0.5)
    clock[0] += 60  # refills to burst, never past it
    assert [buckets.take("c", limit) for _ in range(4)][-1] == pytest.approx(0.5)


def test_a_cache_that_is_not_redis_uses_the_in_process_buckets(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    rate_limit.local_buckets.clear()
    name = uuid.uuid4().hex
    limit = RateLimit(0.5, 1)

    async def twice():
        return [await take("default", name, limit), await take("default", name, limit)]

    first, second = asyncio.run(twice())
    assert first is None
    assert second == pytest.approx(2.0, abs=0.01)
    assert rate_limit.local_buckets._buckets[f"default:{name}"][0] < 1


# --- Redis buckets ----------------------------------------------------------------------------


@pytest.fixture(params=["mcp_oauth.shared.redis_cache.RedisCache", "django.core.cache.backends.redis.RedisCache"])
def redis_cache(request, settings):
    """A Redis cache alias ``rate`` (mcp_oauth's backend: async client on the loop; Django's:
    its sync client in a thread), with a key prefix of its own."""
    require_redis()
    prefix = f"ratetest{uuid.uuid4().hex[:8]}"
    settings.CACHES = {
        **settings.CACHES,
        "rate": {"BACKEND": request.param, "LOCATION": REDIS_URL, "KEY_PREFIX": prefix},
    }
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_CACHE": "rate"}
    yield "rate"
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)
    client.close()


def test_redis_bucket_answers_the_wait_until_a_token_is_back(redis_cache):
    limit = RateLimit(0.25, 2)  # one token every 4 s, two at once
    name = uuid.uuid4().hex

    async def three():
        return [await take(redis_cache, name, limit) for _ in range(3)]

    first, second, third = asyncio.run(three())
    assert (first, second) == (None, None)
    assert 3.9 < third <= 4.0
    assert retry_after_seconds(third) == 4


def test_redis_bucket_refills(redis_cache):
    limit = RateLimit(5.0, 1)  # a token every 0.2 s
    name = uuid.uuid4().hex

    async def scenario():
        got = [await take(redis_cache, name, limit), await take(redis_cache, name, limit)]
        await asyncio.sleep(0.3)
        got.append(await take(redis_cache, name, limit))
        return got

    first, refused, refilled = asyncio.run(scenario())
    assert first is None
    assert 0 < refused <= 0.2
    assert refilled is None


def test_redis_bucket_is_one_hash_that_expires_when_full_again(redis_cache):
    import redis
    from django.core.cache import caches

    name = uuid.uuid4().hex
    asyncio.run(take(redis_cache, name, RateLimit(1.0, 10)))
    client = redis.Redis.from_url(REDIS_URL)
    key = caches[redis_cache].make_key(rate_limit.KEY_PREFIX + name)
    state = client.hgetall(key)
    assert float(state[b"tokens"]) == pytest.approx(9.0, abs=0.01)
    assert 1000 < client.pttl(key) <= 2000  # (burst - tokens) / rate + 1 s
    client.close()


def test_a_redis_script_flush_is_survived(redis_cache):
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    client.script_flush()
    client.close()
    assert asyncio.run(take(redis_cache, uuid.uuid4().hex, RateLimit(1.0, 1))) is None


def test_an_unreachable_redis_lets_the_request_through(settings):
    settings.CACHES = {
        **settings.CACHES,
        "away": {"BACKEND": "mcp_oauth.shared.redis_cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"},
    }
    assert asyncio.run(take("away", "client", RateLimit(1.0, 1))) is None


# --- the endpoint -----------------------------------------------------------------------------


@pytest.fixture
def lane():
    return McpLane(get_asgi_application())


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


@pytest.fixture
def shed_signals():
    seen = []

    def receiver(sender, **kwargs):
        seen.append({k: v for k, v in kwargs.items() if k != "signal"})

    request_shed.connect(receiver)
    yield seen
    request_shed.disconnect(receiver)


def modern_call(token, request_id):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta},
    }
    headers = {
        "authorization": f"Bearer {token}",
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    return headers, json.dumps(body).encode()


def limited(request_id, retry_after):
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": -32029,
            "message": "Rate limit exceeded",
            "data": {"reason": "rate_limit", "retryAfter": retry_after},
        },
    }


def test_a_client_over_its_rate_gets_429_with_retry_after_from_the_redis_bucket(
    lane, token, public_app, redis_cache, settings, shed_signals
):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 0.5, "burst": 2}}
    statuses = []
    for n in (1, 2, 3):
        headers, body = modern_call(token, n)
        status, response_headers, answer = asgi_call(lane, "POST", "/mcp", headers, body)
        statuses.append(status)
    assert statuses == [200, 200, 429]
    assert response_headers["retry-after"] == "2"  # one token every 2 s
    assert response_headers["content-type"] == "application/json"
    assert json.loads(answer) == limited(3, 2)
    assert shed_signals == [{"reason": "rate_limit", "client_id": public_app.client_id, "path": "/mcp"}]


def test_a_2025_session_client_is_limited_too(lane, token, redis_cache, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 0.25, "burst": 2}}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"authorization": f"Bearer {token}", "accept": ACCEPT, "content-type": "application/json"}
    status, response_headers, _ = asgi_call(lane, "POST", "/mcp", headers, json.dumps(init).encode())
    assert status == 200
    headers |= {"mcp-session-id": response_headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    ping = json.dumps({"jsonrpc": "2.0", "id": "p2", "method": "ping"}).encode()
    assert asgi_call(lane, "POST", "/mcp", headers, ping)[0] == 200
    status, response_headers, answer = asgi_call(lane, "POST", "/mcp", headers, ping)
    assert status == 429
    assert response_headers["retry-after"] == "4"
    assert json.loads(answer) == limited("p2", 4)


def test_the_bucket_is_per_client(lane, token, user, resource, mint_token, redis_cache, settings):
    from oauth2_provider.models import get_application_model

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 0.1, "burst": 1}}
    other_app = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    other = mint_token(user, other_app, "mcp", resource.uri)
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 1))[0] == 200
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 2))[0] == 429
    assert asgi_call(lane, "POST", "/mcp", *modern_call(other, 3))[0] == 200


class PerClientAdapter(DefaultMCPAdapter):
    """One client limited to a burst of one; every other client unlimited."""

    limited_client_id = ""

    def mcp_rate_limit(self, principal):
        if principal.client_id == self.limited_client_id:
            return {"rate": 0.2, "burst": 1}
        return None


def test_the_adapter_overrides_the_limit_per_client(
    lane, token, public_app, user, resource, mint_token, redis_cache, settings
):
    from oauth2_provider.models import get_application_model

    PerClientAdapter.limited_client_id = public_app.client_id
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "MCP_RATE_LIMIT": {"rate": 1000, "burst": 1000},
        "ADAPTER": f"{__name__}.PerClientAdapter",
    }
    free_app = get_application_model().objects.create(
        name="Free",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    free = mint_token(user, free_app, "mcp", resource.uri)
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 1))[0] == 200
    status, response_headers, answer = asgi_call(lane, "POST", "/mcp", *modern_call(token, 2))
    assert status == 429
    assert response_headers["retry-after"] == "5"
    assert json.loads(answer) == limited(2, 5)
    assert [asgi_call(lane, "POST", "/mcp", *modern_call(free, n))[0] for n in range(5)] == [200] * 5


def test_no_limit_by_default_and_no_bucket_written(lane, token, redis_cache):
    import redis
    from django.core.cache import caches

    assert [asgi_call(lane, "POST", "/mcp", *modern_call(token, n))[0] for n in range(5)] == [200] * 5
    client = redis.Redis.from_url(REDIS_URL)
    prefix = caches[redis_cache].make_key(rate_limit.KEY_PREFIX)
    assert list(client.scan_iter(f"{prefix}*")) == []
    client.close()


def test_an_unauthenticated_request_is_challenged_not_limited(lane, redis_cache, settings, resource):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 0.1, "burst": 1}}
    for n in range(3):
        assert asgi_call(lane, "POST", "/mcp", *modern_call("bad-token", n))[0] == 401


def test_the_limit_refills_through_the_endpoint(lane, token, redis_cache, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 4, "burst": 1}}
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 1))[0] == 200
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 2))[0] == 429
    time.sleep(0.3)  # a token every 0.25 s
    assert asgi_call(lane, "POST", "/mcp", *modern_call(token, 3))[0] == 200
