"""The Redis cache backend (mcp_oauth.redis_cache) shares its pools across backend instances.

Django's cache handler gives every ASGI request task its own backend instance; the pools and
clients must still be one per process (and per event loop for async reads), or every request
opens a Redis connection. Pools connect lazily, so no Redis server is needed here.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("redis")

from mcp_oauth.redis_cache import RedisCache  # noqa: E402 - after the importorskip

PARAMS = {"OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2}}


def backend(location: str = "redis://127.0.0.1:1/0", params: dict | None = None) -> RedisCache:
    return RedisCache(location, params or PARAMS)


def test_instances_share_one_sync_pool_and_client():
    first, second = backend(), backend()
    assert first._cache.get_client() is second._cache.get_client()
    assert first._cache._get_connection_pool(False) is second._cache._get_connection_pool(False)


def test_instances_share_one_async_client_per_event_loop():
    async def client_of(cache: RedisCache):
        return cache._async_client()

    async def both():
        return await client_of(backend()), await client_of(backend())

    first, second = asyncio.run(both())
    assert first is second
    other_loop, _ = asyncio.run(both())
    assert other_loop is not first  # a client belongs to the loop that made it


def test_another_server_or_options_get_their_own_pool():
    base = backend()._cache.get_client()
    assert backend("redis://127.0.0.1:2/0")._cache.get_client() is not base
    assert backend(params={"OPTIONS": {"socket_timeout": 0.3}})._cache.get_client() is not base


def test_the_async_clients_of_closed_event_loops_are_dropped():
    """Every asyncio.run (or async_to_sync from a thread without a loop) is a new loop: each
    one's client and Redis connection must not be kept for the life of the process."""
    import gc

    from mcp_oauth import redis_cache

    from .topology import REDIS_URL

    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")
    cache = backend(REDIS_URL)
    for _ in range(20):
        assert asyncio.run(cache.aget("mcp-test-absent", "default")) == "default"  # one connection each
    gc.collect()
    assert len(redis_cache._async_clients) == 1  # the last loop's, dropped when the next one reads
