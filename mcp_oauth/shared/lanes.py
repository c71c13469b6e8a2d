"""The plumbing of an ASGI lane: what serves a request before Django's handler, without its middleware.

Used by the MCP endpoint's lane (:mod:`mcp_oauth.mcp_server.transport.asgi`) and the token
endpoint's (:mod:`mcp_oauth.authorization_server.asgi`):

* :class:`RequestThread` and :func:`call_on_request_thread`: a request's one thread, taken from a
  small pool of single-thread executors (not created per request) and given back;
* :func:`close_on_loop`: ``request_finished`` on the event loop for a request that ran no sync
  code (without Django's receivers that clean up a thread's state);
* :class:`ScopeHeaders` (``request.headers`` from the ASGI scope) and :func:`http_path`.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from django.conf import settings
from django.core import signals
from django.core.cache import close_caches
from django.core.cache.backends.base import BaseCache
from django.core.handlers.base import reset_urlconf
from django.db import close_old_connections
from django.http.request import HttpHeaders
from django.http.response import HttpResponseBase
from django.utils.module_loading import import_string

__all__ = ["RequestThread", "ScopeHeaders", "call_on_request_thread", "close_on_loop", "http_path"]

T = TypeVar("T")

#: Idle request threads kept for reuse (more are created under load, and shut down when returned).
IDLE_THREADS = 32


class _ThreadPool:
    """Single-thread executors handed to requests one at a time, reused."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._idle: list[ThreadPoolExecutor] = []
        self._lock = threading.Lock()

    def acquire(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-request")

    def release(self, executor: ThreadPoolExecutor) -> None:
        with self._lock:
            if len(self._idle) < self.keep:
                self._idle.append(executor)
                return
        executor.shutdown(wait=False)


_threads = _ThreadPool(IDLE_THREADS)


class RequestThread(Executor):
    """The one thread of a request (the executor of its ``ThreadSensitiveContext``): taken from
    the lane's pool at the first sync call, returned by :meth:`release`. ``calls`` counts the
    sync calls (thread hops) the request made."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self.calls = 0

    @property
    def used(self) -> bool:
        return self._executor is not None

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future:
        if self._executor is None:
            self._executor = _threads.acquire()
        self.calls += 1
        return self._executor.submit(fn, *args, **kwargs)

    def release(self) -> None:
        if self._executor is not None:
            _threads.release(self._executor)
            self._executor = None


#: At most this many :func:`call_on_request_thread` calls run at once per event loop (worker);
#: more wait on the loop, holding no thread (a burst of token requests cannot grow the worker's
#: threads past it; its database pool is smaller anyway).
CALL_THREADS = IDLE_THREADS

#: event loop -> the semaphore of its :func:`call_on_request_thread` calls.
_call_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


async def call_on_request_thread(fn: Callable[..., T], /, *args: Any) -> T:
    """``fn(*args)`` on a thread of the request-thread pool, in a copy of the caller's context:
    one thread hop, for a request whose sync work is a single call (the token lane).

    Leaner than ``sync_to_async`` in a ``ThreadSensitiveContext``: no context is copied back,
    and the result comes back through one ``call_soon_threadsafe``. Code in ``fn`` that calls
    ``async_to_sync`` still works (asgiref runs the coroutine on an event loop of its own).
    At most :data:`CALL_THREADS` calls run at once per event loop; the others wait for a slot
    without a thread. The thread goes back to the pool once ``fn`` returned, also when the caller
    was cancelled meanwhile (a client that left): the call itself is never interrupted.

    :raises: whatever ``fn`` raised.
    """
    loop = asyncio.get_running_loop()
    slots = _call_slots.get(loop)
    if slots is None:
        slots = _call_slots[loop] = asyncio.Semaphore(CALL_THREADS)
    await slots.acquire()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()
    executor = _threads.acquire()

    def run() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            error = exc
        try:
            _threads.release(executor)  # before the caller resumes: the thread is free for its next call
        finally:
            loop.call_soon_threadsafe(_settle, future, result, error, slots)

    try:
        executor.submit(run)
    except BaseException:  # an executor shut down under us (interpreter exit)
        _threads.release(executor)
        slots.release()
        raise
    return await future


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None, slots: asyncio.Semaphore) -> None:
    slots.release()  # on the loop, once the call is over (whether or not its caller still waits)
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _caches_close_is_noop() -> bool:
    """Whether every configured cache backend's ``close()`` is ``BaseCache``'s (does nothing)."""
    for options in getattr(settings, "CACHES", {}).values():
        try:
            backend = import_string(options["BACKEND"])
        except (ImportError, KeyError):
            return False
        if getattr(backend, "close", None) is not BaseCache.close:
            return False
    return True


_UNSET = object()


class _LoopFinished:
    """``request_finished`` for a request that ran no sync code (no thread hop), sent on the loop.

    Django's own receivers that only concern a thread's state are left out: ``close_old_connections``
    (database connections live on sync threads: none was opened on the loop), ``reset_urlconf``
    (the lane sets no urlconf) and, when every configured cache's ``close()`` is the base no-op,
    ``close_caches``. Every other receiver (a site's or a library's) runs as with ``send``; async
    ones are awaited. Receivers come from the signal's own lookup (``Signal._live_receivers``,
    whose result is the same pair of lists from Django 5.0 to 6.1, unlike the receiver records).
    """

    def __init__(self) -> None:
        self._caches: Any = _UNSET
        self._skipped: tuple[Any, ...] = ()

    def skipped(self) -> tuple[Any, ...]:
        """Django's thread-only receivers left out, worked out again when ``settings.CACHES`` changes."""
        caches_setting = getattr(settings, "CACHES", None)
        if caches_setting is not self._caches:
            skipped: tuple[Any, ...] = (close_old_connections, reset_urlconf)
            if _caches_close_is_noop():
                skipped += (close_caches,)
            self._skipped, self._caches = skipped, caches_setting
        return self._skipped

    async def send(self, sender: Any) -> None:
        """Run the live receivers of ``sender`` (Django's own lookup: sender filtering, dead weak
        references dropped) but the skipped ones; async ones are awaited together."""
        signal = signals.request_finished
        if not signal.receivers:
            return
        sync_receivers, async_receivers = signal._live_receivers(sender)
        skipped = self.skipped()
        for receiver in sync_receivers:
            if not any(receiver is fn for fn in skipped):
                receiver(signal=signal, sender=sender)
        awaited = [
            receiver(signal=signal, sender=sender)
            for receiver in async_receivers
            if not any(receiver is fn for fn in skipped)
        ]
        if awaited:
            await asyncio.gather(*awaited)


_loop_finished = _LoopFinished()


async def close_on_loop(response: HttpResponseBase) -> None:
    """``response.close()`` for a request that ran no sync code: its resource closers, then
    :class:`_LoopFinished`'s ``request_finished`` (sender: the response's handler class, as there)."""
    closers = response._resource_closers  # type: ignore[attr-defined]
    for closer in closers:
        try:
            closer()
        except Exception:  # noqa: BLE001 - as HttpResponseBase.close
            pass
    closers.clear()
    response.closed = True
    await _loop_finished.send(response._handler_class)  # type: ignore[attr-defined]


class ScopeHeaders(HttpHeaders):
    """``request.headers`` built from the ASGI scope's header list, as ``HttpHeaders(request.META)``
    is (same names, values, order and lookups: names with ``_`` dropped, repeated fields joined with
    ``,``, latin-1), without a pass over the whole ``META``."""

    def __init__(self, raw: Any) -> None:
        store: dict[str, tuple[str, str]] = {}
        for name_bytes, value_bytes in raw:
            name = name_bytes.decode("latin1")
            if "_" in name:
                continue
            lower = name.lower()
            value = value_bytes.decode("latin1")
            found = store.get(lower)
            store[lower] = (found[0], f"{found[1]},{value}") if found is not None else (lower.title(), value)
        self._store = store


def http_path(scope: dict[str, Any]) -> str | None:
    """The path of an HTTP scope below its ``root_path`` (the URLconf's view), None for other scopes."""
    if scope.get("type") != "http":
        return None
    path = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path
