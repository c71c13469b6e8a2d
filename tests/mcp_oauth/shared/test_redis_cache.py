"""The Redis cache backend (mcp_oauth.shared.redis_cache) shares its pools across backend instances.

Django's cache handler gives every ASGI request task its own backend instance; the pools and
clients must still be one per process (and per event loop for async reads), or every request
opens a Redis connection. Pools connect lazily, so no Redis server is needed here.
"""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("redis")

from mcp_oauth.shared.redis_cache import RedisCache  # after the importorskip

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

    from mcp_oauth.shared import redis_cache
    from tests.support.topology import REDIS_URL

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


def _lean_backend(name: str, max_connections: int = 2) -> RedisCache:
    from tests.support.topology import REDIS_URL, require_redis

    require_redis()
    options = {**PARAMS["OPTIONS"], "socket_timeout": 2, "client_name": name, "max_connections": max_connections}
    return backend(REDIS_URL, {"OPTIONS": options, "KEY_PREFIX": name})


def _connections_named(name: str) -> list[dict]:
    import redis

    from tests.support.topology import REDIS_URL

    with redis.Redis.from_url(REDIS_URL) as admin:
        return [c for c in admin.client_list() if c.get("name") == name]


def test_the_hot_path_mget_answers_what_redis_py_answers():
    """aget_many_raw (the bearer check's MGET, on LeanReads) gives the stored bytes in order,
    None for an absent key, exactly as the redis-py client's mget does."""
    cache = _lean_backend("mcp-test-lean-values")
    cache.set("a", {"x": 1}, 60)
    cache.set("b", "two", 60)

    async def both():
        raw = await cache.aget_many_raw(["a", "absent", "b"])
        via_client = await cache._async_client().mget([cache.make_key(k) for k in ("a", "absent", "b")])
        return raw, via_client

    try:
        raw, via_client = asyncio.run(both())
        assert raw == via_client
        assert raw[1] is None
        assert cache.loads(raw[0]) == {"x": 1} and cache.loads(raw[2]) == "two"
    finally:
        cache.delete_many(["a", "b"])


def test_the_hot_path_mget_keeps_to_max_connections_and_reuses_them():
    """100 concurrent reads with max_connections=2 use 2 Redis connections at most, and the next
    burst reuses them (no new connection per read)."""
    name = "mcp-test-lean-bound"
    cache = _lean_backend(name, max_connections=2)

    async def burst():
        results = await asyncio.gather(*(cache.aget_many_raw([f"k{n}"]) for n in range(100)))
        assert results == [[None]] * 100
        first = sorted(c["id"] for c in _connections_named(name))
        await asyncio.gather(*(cache.aget_many_raw([f"k{n}"]) for n in range(100)))
        return first, sorted(c["id"] for c in _connections_named(name))

    first, second = asyncio.run(burst())
    assert 1 <= len(first) <= 2
    assert second == first


def test_the_hot_path_mget_survives_connections_the_server_closed():
    """Idle connections killed by the server (a Redis restart, an idle timeout) are dropped and
    the read answers on a new connection, without an error reaching the bearer check."""
    import redis

    from tests.support.topology import REDIS_URL

    name = "mcp-test-lean-killed"
    cache = _lean_backend(name, max_connections=2)
    cache.set("present", "value", 60)

    async def scenario():
        await asyncio.gather(*(cache.aget_many_raw(["present"]) for _ in range(10)))
        before = _connections_named(name)
        assert before
        with redis.Redis.from_url(REDIS_URL) as admin:
            for connection in before:
                admin.client_kill_filter(_id=connection["id"])
        raw = await cache.aget_many_raw(["present"])
        after = _connections_named(name)
        return before, raw, after

    try:
        before, raw, after = asyncio.run(scenario())
        assert cache.loads(raw[0]) == "value"
        assert {c["id"] for c in after}.isdisjoint({c["id"] for c in before})
        assert len(after) == 1
    finally:
        cache.delete("present")


def test_the_hot_path_mget_of_an_unreachable_server_raises_a_redis_error():
    """No server: redis-py's ConnectionError (the bearer check then takes the synchronous path)."""
    import redis

    cache = backend("redis://127.0.0.1:1/0")
    with pytest.raises(redis.exceptions.ConnectionError):
        asyncio.run(cache.aget_many_raw(["k"]))


def test_the_hot_path_mget_of_a_server_that_does_not_answer_times_out_once_per_round_trip():
    """A server that accepts the connection and never answers: redis-py's TimeoutError after the
    URL's socket_timeout (applied to the whole round trip, handshake included), not a hang, and
    the connection is not kept for the next read."""
    import socket
    import time

    import redis

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        cache = backend(f"redis://127.0.0.1:{port}/0", {"OPTIONS": {"socket_timeout": 0.3}})

        async def scenario():
            started = time.monotonic()
            with pytest.raises(redis.exceptions.TimeoutError):
                await cache.aget_many_raw(["k"])
            return time.monotonic() - started, len(cache._lean_reads()._idle)

        elapsed, idle = asyncio.run(scenario())
        assert 0.25 <= elapsed < 2
        assert idle == 0
    finally:
        listener.close()
