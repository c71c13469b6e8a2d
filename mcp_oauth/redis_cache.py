"""Django's Redis cache backend, with one ``redis.Redis`` client per connection pool.

``django.core.cache.backends.redis.RedisCache`` builds a new ``redis.Redis`` object for every
cache operation; with redis-py 5+ that object's constructor fills a table of ~170 response
callbacks, about a quarter of a millisecond of CPU, which is more than the Redis round trip
itself. The token and resource caches of the hot path (:mod:`mcp_oauth.resource_server.cache`)
do one or two operations per request. This backend keeps the client (redis-py clients are
thread-safe: each command borrows a connection from the shared pool). Use it as::

    CACHES = {"default": {"BACKEND": "mcp_oauth.redis_cache.RedisCache", "LOCATION": "redis://…"}}

Same options, same keys, same serialisation as Django's backend.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient

__all__ = ["RedisCache", "RedisCacheClient"]


class RedisCacheClient(DjangoRedisCacheClient):
    """:class:`DjangoRedisCacheClient` whose ``get_client`` returns one client per pool."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]  # Django private, not in django-stubs
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)  # type: ignore[attr-defined]  # Django private (the redis.Redis class), not in django-stubs
        return client


class RedisCache(DjangoRedisCache):
    """Django's Redis cache backend using :class:`RedisCacheClient`."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
