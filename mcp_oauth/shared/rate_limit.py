"""Per-client token buckets: ``rate`` requests per second on average, ``burst`` at once.

A bucket holds at most ``burst`` tokens and gains ``rate`` tokens per second; a request takes
one token, or is refused with the seconds until one token is back (the ``Retry-After`` of the
HTTP 429, RFC 6585 §4 / RFC 9110 §10.2.3). A new bucket starts full.

Where the buckets live (:func:`take`):

* **Redis** (the cache alias is a Django ``RedisCache``, :class:`mcp_oauth.shared.redis_cache.RedisCache`
  or Django's own): one hash per bucket (``tokens``, ``ts``), updated by one Lua script
  (:data:`TOKEN_BUCKET_LUA`, run with ``EVALSHA``: one round trip, atomic, the clock is Redis's
  ``TIME`` so that the workers' clocks do not matter). The hash expires once the bucket would be
  full again. Shared by every worker: the limit is the client's, not the worker's. On the event
  loop with :class:`~mcp_oauth.shared.redis_cache.RedisCache` (no thread hop; its lean connections,
  :meth:`~mcp_oauth.shared.redis_cache.RedisCache.aexecute_raw`).
* **In process** (any other cache backend: LocMemCache, Memcached, the database):
  :class:`LocalBuckets`, one dict per process. With N worker processes a client then gets up to
  N times its rate.

A Redis error (unreachable, timed out) lets the request through and logs a warning: the limit
is a fairness measure, not a guard of correctness; the overload answers of
:mod:`mcp_oauth.shared.overload` still apply to the request itself.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache

from mcp_oauth.shared.redis_cache import RedisCache

try:
    from redis.exceptions import NoScriptError, RedisError
except ImportError:  # pragma: no cover - redis-py is a dependency of the Redis cache backends only
    NoScriptError = RedisError = ()  # type: ignore[assignment,misc]

__all__ = [
    "KEY_PREFIX",
    "TOKEN_BUCKET_LUA",
    "LocalBuckets",
    "RateLimit",
    "local_buckets",
    "retry_after_seconds",
    "take",
]

log = logging.getLogger(__name__)

#: Cache-key prefix of the buckets (the cache's own ``KEY_PREFIX`` and version go in front).
KEY_PREFIX = "mcp_oauth:rate:"

#: KEYS[1]: the bucket; ARGV: rate (tokens/s), burst (tokens). Returns ``{allowed (0|1), wait}``,
#: ``wait`` the seconds until one token is back, as a string (Lua numbers become integers in a reply).
TOKEN_BUCKET_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate)
end
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', string.format('%.6f', now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {allowed, string.format('%.6f', wait)}
"""

_SHA = hashlib.sha1(TOKEN_BUCKET_LUA.encode()).hexdigest()  # Redis names scripts by SHA-1


@dataclass(frozen=True)
class RateLimit:
    """A token bucket's shape: ``rate`` tokens per second (> 0), at most ``burst`` tokens (≥ 1)."""

    rate: float
    burst: int

    @classmethod
    def parse(cls, value: Any) -> RateLimit | None:
        """``None`` → None (no limit); a :class:`RateLimit` as is; a dict ``{"rate": r, "burst": b}``
        (``burst`` defaults to ``max(1, ceil(rate))``); a number → that rate, its default burst.

        :raises ValueError: a rate ≤ 0, a burst < 1, or another shape.
        """
        if value is None or isinstance(value, RateLimit):
            return value
        if isinstance(value, dict):
            unknown = set(value) - {"rate", "burst"}
            if unknown or "rate" not in value:
                raise ValueError(f'expected {{"rate": <requests per second>, "burst": <requests>}}, got {value!r}')
            rate, burst = value["rate"], value.get("burst")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            rate, burst = value, None
        else:
            raise ValueError(f'expected None, a number or {{"rate": …, "burst": …}}, got {value!r}')
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0 or math.isinf(rate):
            raise ValueError(f"rate must be a number of requests per second > 0, got {rate!r}")
        if burst is None:
            burst = max(1, math.ceil(rate))
        if not isinstance(burst, int) or isinstance(burst, bool) or burst < 1:
            raise ValueError(f"burst must be an integer ≥ 1, got {burst!r}")
        return cls(float(rate), burst)


def retry_after_seconds(wait: float) -> int:
    """``Retry-After`` for a bucket that has a token again in ``wait`` seconds: whole seconds, ≥ 1."""
    return max(1, math.ceil(wait))


class LocalBuckets:
    """The in-process buckets (a cache that is not Redis): ``key -> (tokens, monotonic time)``."""

    #: Buckets kept at most; past it, the full ones are dropped (they equal a new bucket).
    MAX_BUCKETS = 10_000

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, limit: RateLimit) -> float | None:
        """Take a token: None when allowed, else the seconds until one is back."""
        now = time.monotonic()
        with self._lock:
            tokens, ts = self._buckets.get(key, (float(limit.burst), now))
            tokens = min(float(limit.burst), tokens + max(0.0, now - ts) * limit.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                if len(self._buckets) > self.MAX_BUCKETS:
                    self._prune(now, limit)
                return None
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / limit.rate

    def _prune(self, now: float, limit: RateLimit) -> None:
        # Buckets full again by now are the same as no bucket.
        full = [k for k, (tokens, ts) in self._buckets.items() if tokens + (now - ts) * limit.rate >= limit.burst]
        for key in full:
            del self._buckets[key]

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()


#: This process's buckets, for caches that are not Redis.
local_buckets = LocalBuckets()


def _decode(reply: Any) -> float | None:
    allowed, wait = reply
    if int(allowed) == 1:
        return None
    return float(wait.decode() if isinstance(wait, bytes) else wait)


def _sync_take(client: Any, key: str, limit: RateLimit) -> float | None:
    try:
        reply = client.evalsha(_SHA, 1, key, repr(limit.rate), limit.burst)
    except NoScriptError:
        reply = client.eval(TOKEN_BUCKET_LUA, 1, key, repr(limit.rate), limit.burst)
    return _decode(reply)


async def _async_take(cache: Any, key: str, limit: RateLimit) -> float | None:
    rate, burst = repr(limit.rate), limit.burst
    try:
        reply = await cache.aexecute_raw("EVALSHA", _SHA, 1, key, rate, burst)
    except NoScriptError:  # first call on this Redis (or after SCRIPT FLUSH): EVAL loads it
        reply = await cache.aexecute_raw("EVAL", TOKEN_BUCKET_LUA, 1, key, rate, burst)
    return _decode(reply)


async def take(cache_alias: str, name: str, limit: RateLimit) -> float | None:
    """Take one token from the bucket ``name`` (a client id): None when allowed, else the seconds
    until the bucket has a token again (use :func:`retry_after_seconds` for ``Retry-After``).

    One Redis round trip (``EVALSHA``; ``EVAL`` once when Redis does not know the script yet)
    with a Redis cache, none otherwise. A Redis error allows the request (logged).
    """
    cache = caches[cache_alias]
    if not isinstance(cache, DjangoRedisCache):
        return local_buckets.take(f"{cache_alias}:{name}", limit)
    key = cache.make_key(KEY_PREFIX + name)
    try:
        if isinstance(cache, RedisCache):  # mcp_oauth's backend: its lean connections on this loop
            return await _async_take(cache, key, limit)
        client = cache._cache.get_client(key, write=True)
        return await sync_to_async(_sync_take, thread_sensitive=False)(client, key, limit)
    except RedisError as exc:
        log.warning("rate-limit bucket unavailable, request allowed: %s: %s", type(exc).__name__, exc)
        return None
