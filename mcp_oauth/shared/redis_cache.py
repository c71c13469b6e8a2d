"""Django's Redis cache backend, with one ``redis.Redis`` client per connection pool.

``django.core.cache.backends.redis.RedisCache`` builds a new ``redis.Redis`` object for every
cache operation; with redis-py 5+ that object's constructor fills a table of ~170 response
callbacks, about a quarter of a millisecond of CPU, which is more than the Redis round trip
itself. The token and resource caches of the hot path (:mod:`mcp_oauth.resource_server.cache`)
do one or two operations per request. This backend keeps the client (redis-py clients are
thread-safe: each command borrows a connection from the shared pool). Use it as::

    CACHES = {"default": {"BACKEND": "mcp_oauth.shared.redis_cache.RedisCache", "LOCATION": "redis://…"}}

Same options, same keys, same serialisation as Django's backend.

**One pool per process, not per backend instance.** Django's cache handler keeps its backend
instances in an ``asgiref.local.Local`` that is not thread-critical: under ASGI every request
task gets its own ``RedisCache`` object. Django's backend keeps its connection pools on that
object, so each request would open (and leak until garbage collection) its own Redis
connection; with redis-py 8 a new connection also reads package metadata for ``CLIENT
SETINFO``, about 2 ms of CPU. Here the pools (sync) and the async clients (per event loop) are
kept per process, keyed by server URL and options, and every instance shares them.

Reads also have a native async form (:meth:`RedisCache.aget`, :meth:`RedisCache.aget_many`:
``redis.asyncio``, one client per event loop) so that the hot path of an async view reads its
caches without a sync/async thread hop (Django's default ``aget`` runs ``get`` in a thread).
``native_async`` is True on this backend; writes stay synchronous (they are rare), except
:meth:`RedisCache.aadd_get_many_raw` (a ``SET NX`` pipelined with the ``MGET``: the DPoP ``jti``
replay check, :mod:`mcp_oauth.dpop.replay`).
:meth:`RedisCache.aget_many_raw` answers the stored bytes, for the bearer check's per-process
decoded entries (:mod:`mcp_oauth.resource_server.decoded`).

**The hot path's MGET** (:meth:`RedisCache.aget_many_raw`, every MCP request) goes through
:class:`LeanReads`: redis-py's own connections and parser (hiredis when installed), borrowed
from a small per-loop list instead of the client's pool. redis-py 7.2+ wraps every command of
``Redis.execute_command`` and ``BlockingConnectionPool.get_connection`` in observability
recording (a dozen awaited no-op hooks, a condition, a lock, two timeouts and a retry closure per
command), which cost more CPU than the round trip itself (~74 µs a read against ~45 µs on
redis-py 5.2). Same bound (``max_connections``, ``timeout``), same options, same errors; the URL's
``socket_timeout`` bounds the whole round trip with one timer (redis-py puts the write under
``asyncio.wait_for``, a task per command before Python 3.12, and the read under another).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any

import redis.asyncio
from django.core.cache.backends.redis import RedisCache as DjangoRedisCache
from django.core.cache.backends.redis import RedisCacheClient as DjangoRedisCacheClient
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = ["ASYNC_MAX_CONNECTIONS", "LeanReads", "RedisCache", "RedisCacheClient"]

#: Redis connections of the async reads, per event loop (``OPTIONS["max_connections"]`` overrides).
ASYNC_MAX_CONNECTIONS = 16


#: ``(server URL, options) -> (pool, client)`` of the synchronous clients, per process.
_sync_clients: dict[tuple[str, str], tuple[Any, Any]] = {}
#: ``event loop -> {(server URL, options): client}`` of the async clients.
_async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], Any]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _options_key(options: dict[str, Any]) -> str:
    return repr(sorted(options.items(), key=lambda item: item[0]))


class LeanReads:
    """``MGET`` from one event loop on redis-py connections of its own (see the module docstring).

    At most ``pool.max_connections`` reads are on the wire at once; a read that waits longer than
    ``pool.timeout`` seconds for a connection raises ``redis.exceptions.ConnectionError`` ("No
    connection available.", as ``BlockingConnectionPool`` does). Connections come from
    ``pool.make_connection()`` (the URL's host, database, credentials, TLS and socket options),
    connect lazily, and go back to the idle list only after a complete answer: a read that failed
    or was cancelled drops its connection. A failure on a reused connection (the server restarted
    or closed it while idle) drops every idle connection and tries once more on a new one, as
    redis-py's retry would.

    :param pool: a ``redis.asyncio.BlockingConnectionPool``, used only as the connection factory
        and for its ``max_connections`` and ``timeout``.
    """

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._idle: list[Any] = []
        self._slots = asyncio.Semaphore(pool.max_connections)
        self._timeout: float | None = pool.timeout
        #: The URL's socket timeout, applied once to the whole round trip: redis-py applies it to
        #: the write and to the read separately, the write through ``asyncio.wait_for`` (a task
        #: of its own per command before Python 3.12).
        self._round_trip_timeout: float | None = pool.connection_kwargs.get("socket_timeout")
        self._connection_kwargs = {**pool.connection_kwargs, "socket_timeout": None}

    def _new_connection(self) -> Any:
        """A connection of the pool's class and options, without redis-py's per-step timeouts."""
        return self._pool.connection_class(**self._connection_kwargs)

    async def _round_trip(self, connection: Any, args: tuple[Any, ...]) -> Any:
        if not connection.is_connected:
            await connection.connect()
        await connection.send_command(*args, check_health=False)
        return await connection.read_response()

    async def mget(self, keys: list[str]) -> list[bytes | None]:
        """The values of ``keys`` in order (None: absent), as redis-py's ``mget`` answers them.

        :raises redis.exceptions.RedisError: connection, timeout or server errors.
        """
        return await self.execute("MGET", *keys)

    async def execute(self, *args: Any) -> Any:
        """One command (``args``: its name and arguments), its raw answer (as read by redis-py's
        parser): ``MGET`` for the hot path's reads, ``EVALSHA`` for the rate-limit buckets.

        :raises redis.exceptions.RedisError: connection, timeout or server errors (a
            ``NoScriptError`` for an ``EVALSHA`` of a script the server does not know).
        """
        slots = self._slots
        if slots.locked():
            try:
                async with asyncio.timeout(self._timeout):
                    await slots.acquire()
            except TimeoutError:
                raise RedisConnectionError("No connection available.") from None
        else:
            await slots.acquire()  # a free slot: returns without suspending
        try:
            idle = self._idle
            reused = bool(idle)
            connection = idle.pop() if reused else self._new_connection()
            timeout = self._round_trip_timeout
            while True:
                try:
                    if timeout:
                        try:
                            async with asyncio.timeout(timeout):
                                values = await self._round_trip(connection, args)
                        except TimeoutError:
                            await connection.disconnect(nowait=True)
                            raise RedisTimeoutError("Timeout reading from Redis") from None
                    else:
                        values = await self._round_trip(connection, args)
                except (RedisConnectionError, RedisTimeoutError, OSError):
                    await connection.disconnect(nowait=True)
                    if not reused:
                        raise
                    while idle:  # the server went away meanwhile: the others are stale too
                        await idle.pop().disconnect(nowait=True)
                    reused, connection = False, self._new_connection()
                    continue
                except BaseException:  # a server error, a cancellation: its state is unknown
                    await connection.disconnect(nowait=True)
                    raise
                idle.append(connection)
                return values
        finally:
            slots.release()


class RedisCacheClient(DjangoRedisCacheClient):
    """:class:`DjangoRedisCacheClient` whose pools and clients are shared by every instance of
    the process with the same server and options (one ``redis.Redis`` per pool)."""

    def _shared(self, write: bool) -> tuple[Any, Any]:
        index = self._get_connection_pool_index(write)  # type: ignore[attr-defined]  # Django private, not in django-stubs
        server = self._servers[index]  # type: ignore[attr-defined]  # Django private, not in django-stubs
        key = (server, _options_key(self._pool_options))  # type: ignore[attr-defined]  # Django private, not in django-stubs
        shared = _sync_clients.get(key)
        if shared is None:
            with _lock:
                shared = _sync_clients.get(key)
                if shared is None:
                    pool = self._pool_class.from_url(server, **self._pool_options)  # type: ignore[attr-defined]  # Django private, not in django-stubs
                    shared = _sync_clients[key] = (pool, self._client(connection_pool=pool))  # type: ignore[attr-defined]  # Django private (the redis.Redis class), not in django-stubs
        return shared

    def _get_connection_pool(self, write: bool) -> Any:
        return self._shared(write)[0]

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        return self._shared(write)[1]


class RedisCache(DjangoRedisCache):
    """Django's Redis cache backend using :class:`RedisCacheClient`, with native async reads."""

    #: ``aget``/``aget_many`` talk to Redis from the event loop (no thread hop).
    native_async = True

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
        self._async_key: tuple[str, str] | None = None

    def _async_client(self) -> Any:
        """The ``redis.asyncio`` client of the running loop (reads go to the first server), shared
        by every instance of the process with the same server and options."""
        loop = asyncio.get_running_loop()
        if self._async_key is None:
            self._async_key = (self._servers[0], _options_key(self._options))  # type: ignore[attr-defined]  # Django's private cache attributes, absent from django-stubs
        clients = _async_clients.get(loop)
        if clients is None:
            with _lock:
                # A loop's clients hold it (through their connections): its weak key never
                # dies by itself. Drop those of closed loops (asyncio.run, async_to_sync from a
                # thread without a loop: one loop per call), so their sockets are collected.
                for closed in [other for other in list(_async_clients) if other.is_closed()]:
                    _async_clients.pop(closed, None)
                clients = _async_clients.setdefault(loop, {})
        client = clients.get(self._async_key)
        if client is None:
            options = {k: v for k, v in self._cache._pool_options.items() if k != "parser_class"}  # type: ignore[attr-defined]  # Django's private cache-client attribute, absent from django-stubs
            # Bounded: a burst of requests (1,000 streams opening at once) shares a few
            # connections instead of opening (and then keeping) one each; a request that
            # waits past the timeout gets ConnectionError, and its caller the synchronous path.
            options.setdefault("max_connections", ASYNC_MAX_CONNECTIONS)
            options.setdefault("timeout", 1)
            pool = redis.asyncio.BlockingConnectionPool.from_url(self._servers[0], **options)  # type: ignore[attr-defined]  # Django's private cache-client attribute, absent from django-stubs
            client = clients[self._async_key] = redis.asyncio.Redis(connection_pool=pool)
        return client

    def _lean_reads(self) -> LeanReads:
        """The running loop's :class:`LeanReads` for this server and options (one per loop)."""
        client = self._async_client()  # creates the loop's entry and the pool
        clients = _async_clients[asyncio.get_running_loop()]
        key = ("lean", *self._async_key)  # type: ignore[misc]  # set by _async_client
        reads = clients.get(key)
        if reads is None:
            reads = clients[key] = LeanReads(client.connection_pool)
        return reads

    async def aget(self, key: Any, default: Any = None, version: Any = None) -> Any:
        key = self.make_and_validate_key(key, version=version)
        value = await self._async_client().get(key)
        return default if value is None else self._cache._serializer.loads(value)  # type: ignore[attr-defined]  # Django's private cache-client attribute, absent from django-stubs

    async def aget_many(self, keys: Any, version: Any = None) -> dict[Any, Any]:
        """Like ``get_many`` (one ``MGET``), from the event loop."""
        keys = list(keys)
        if not keys:
            return {}
        made = {self.make_and_validate_key(key, version=version): key for key in keys}
        values = await self._async_client().mget(list(made))
        loads = self.loads
        return {made[k]: loads(v) for k, v in zip(made, values, strict=True) if v is not None}

    async def aget_many_raw(self, keys: list[str]) -> list[bytes | None]:
        """The stored bytes of ``keys`` (one ``MGET`` from the event loop), in order, not decoded
        (:meth:`loads` decodes one): for a caller that keeps what it decoded.

        The keys get the cache's prefix and version but are not checked for memcached
        portability (Django's ``validate_key`` only warns, and costs more than the read): use it
        with keys the caller builds itself.
        """
        make_key = self.make_key
        clients = _async_clients.get(asyncio.get_running_loop())
        reads = clients.get(("lean", *self._async_key)) if clients is not None and self._async_key else None
        if reads is None:
            reads = self._lean_reads()
        return await reads.mget([make_key(key) for key in keys])

    async def aexecute_raw(self, *args: Any) -> Any:
        """One Redis command from the event loop on :class:`LeanReads`' connections, its raw answer
        (keys are used as given: make them with :meth:`make_key`). For
        :mod:`mcp_oauth.shared.rate_limit`'s ``EVALSHA``.

        :raises redis.exceptions.RedisError: connection, timeout or server errors.
        """
        return await self._lean_reads().execute(*args)

    async def aadd_get_many_raw(
        self, add_key: str, value: bytes, timeout: int, keys: list[str]
    ) -> tuple[bool, list[bytes | None]]:
        """``SET add_key value NX EX timeout`` (the write server: the first one) and
        :meth:`aget_many_raw` of ``keys`` in one round trip (a pipeline, not a transaction):
        ``(added, stored bytes of keys)``. ``value`` is stored as given (``b"1"`` reads back as
        ``1`` through Django's serializer)."""
        make_key = self.make_key
        pipe = self._async_client().pipeline(transaction=False)
        pipe.set(make_key(add_key), value, nx=True, ex=max(1, int(timeout)))
        pipe.mget([make_key(key) for key in keys])
        added, raws = await pipe.execute()
        return bool(added), raws

    def loads(self, raw: bytes) -> Any:
        """Decode a value as stored by this backend (Django's ``RedisSerializer``)."""
        return self._cache._serializer.loads(raw)  # type: ignore[attr-defined]  # Django's private cache-client attribute, absent from django-stubs
