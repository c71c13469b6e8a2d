"""Liveness and readiness probes for load balancers and orchestrators.

Two paths (``MCP_OAUTH["LIVENESS_PATH"]``, ``MCP_OAUTH["READINESS_PATH"]``), GET or HEAD, no
authentication, answered ``Cache-Control: no-store`` with a JSON body:

``/healthz`` (liveness)
    ``200 {"status": "alive"}`` while the process serves requests, draining or not. It touches
    no dependency: an orchestrator that restarts a worker whose database is away would restart
    every worker for nothing.
``/readyz`` (readiness)
    The checks of ``MCP_OAUTH["READINESS_CHECKS"]``, run concurrently, each within
    ``READINESS_CHECK_TIMEOUT_SECONDS``:

    * ``database``: ``SELECT 1`` on a pooled connection of the default database (given back at once);
    * ``cache``: a read of the ``TOKEN_CACHE`` alias (one Redis round trip with a Redis cache);
    * ``broker``: a connection to the Celery broker, opened and closed (``off`` when tasks run
      eagerly or no Celery app is configured: no broker to need).

    The blocking checks run on a small thread pool of their own (``mcp-readyz``), never on the
    request threads that the token endpoint and ``/mcp`` use, and each check runs at most once at
    a time per event loop: a probe that arrives while one is running waits for that one (up to the
    timeout) instead of starting another. So a dependency that hangs holds one probe thread, not
    one per probe, and probing it never starves the site's own requests.

    ``200 {"status": "ready", "checks": {"database": "up", "cache": "up", "broker": "up"}}``
    when none is down; ``503`` + ``Retry-After`` (``OVERLOAD_RETRY_AFTER_SECONDS``, RFC 9110
    §10.2.3) with ``"status": "unavailable"`` and the down ones named ``"down"`` otherwise. A
    check that raises or runs out of time is down (the exception is logged, never sent), so
    the probe never answers 500. While the worker drains (:mod:`mcp_oauth.mcp_server.transport.drain`) it answers
    ``503 {"status": "draining"}`` without running the checks. Other methods: 405 with ``Allow``.

While the worker drains every response :func:`health_lane` passes on says ``Connection: close``,
so that clients leave their keep-alive connections to it as they use them.

**Where they are served.** :func:`health_lane` wraps the site's ASGI application and answers
the two paths from ASGI messages, before Django: no middleware, so no session, CSRF,
throttling, ``ALLOWED_HOSTS`` check (a probe by pod IP) or ``SECURE_SSL_REDIRECT`` (a probe on
the internal http port), and no thread for liveness. It also handles the ASGI ``lifespan``
scope: on ``lifespan.startup`` it chains the drain signal handler (:func:`mcp_oauth.mcp_server.transport.drain.install`)::

    # asgi.py
    application = health_lane(token_lane(mcp_lane(get_asgi_application())))

A site that keeps its own ``asgi.py`` (or runs WSGI) gets the same answers from the views of
``mcp_oauth.urls`` (:func:`liveness_view`, :func:`readiness_view`), behind its middleware:
its probes then need an allowed ``Host`` (and https, or ``X-Forwarded-Proto`` with
``SECURE_PROXY_SSL_HEADER``, under ``SECURE_SSL_REDIRECT``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from celery import current_app
from django.core.cache import caches
from django.db import connection
from django.http import HttpRequest, HttpResponse

from mcp_oauth.mcp_server.transport import drain
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.lanes import http_path
from mcp_oauth.shared.taskqueue import celery_configured

__all__ = ["CHECKS", "HealthLane", "health_lane", "liveness", "liveness_view", "readiness", "readiness_view"]

logger = logging.getLogger("mcp_oauth.health")

#: The key the cache check reads (never written: a miss is a round trip too).
CACHE_PROBE_KEY = "mcp_oauth:readyz"

#: Threads of the blocking checks: one per check, at most (each runs once at a time), plus one.
PROBE_THREADS = 4

_probe_threads = ThreadPoolExecutor(max_workers=PROBE_THREADS, thread_name_prefix="mcp-readyz")

#: event loop -> {check name: its running check}, for single flight (see the module docstring).
_in_flight: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Future[str]]] = (
    weakref.WeakKeyDictionary()
)


async def _on_probe_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` on a probe thread (not a request thread: see the module docstring)."""
    return await asyncio.get_running_loop().run_in_executor(_probe_threads, fn)


def check_database() -> None:
    """``SELECT 1`` on the default database; the connection goes back to its pool."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()


async def check_cache() -> None:
    """One read of the ``TOKEN_CACHE`` alias (native async when the backend has it)."""
    cache = caches[mcp_oauth_settings.TOKEN_CACHE]
    if getattr(cache, "native_async", False):
        await cache.aget(CACHE_PROBE_KEY)
    else:
        await _on_probe_thread(lambda: cache.get(CACHE_PROBE_KEY))


def check_broker() -> bool:
    """A connection to the Celery broker, opened and closed. :returns: False when there is no
    broker to check (eager tasks, or Celery's implicit default app)."""
    if not celery_configured() or current_app.conf.task_always_eager:
        return False
    timeout = float(mcp_oauth_settings.READINESS_CHECK_TIMEOUT_SECONDS)
    # Socket timeouts too (Redis transport): a broker that accepts and never answers frees the thread.
    options = {**(current_app.conf.broker_transport_options or {}), "socket_timeout": timeout}
    with current_app.connection_for_write(connect_timeout=timeout, transport_options=options) as conn:
        conn.ensure_connection(max_retries=1, timeout=math.ceil(timeout))  # the caller's wait_for caps it
    return True


async def _database() -> str:
    await _on_probe_thread(check_database)
    return "up"


async def _cache() -> str:
    await check_cache()
    return "up"


async def _broker() -> str:
    return "up" if await _on_probe_thread(check_broker) else "off"


#: Readiness check name -> coroutine function answering its state ("up" or "off"; raises when down).
CHECKS: dict[str, Callable[[], Any]] = {"database": _database, "cache": _cache, "broker": _broker}


def _running(name: str) -> asyncio.Future[str]:
    """The running check ``name`` of this event loop, started when none runs."""
    loop = asyncio.get_running_loop()
    running = _in_flight.setdefault(loop, {})
    check = running.get(name)
    if check is None or check.done():
        check = running[name] = asyncio.ensure_future(CHECKS[name]())
        check.add_done_callback(lambda done: _finished(running, name, done))
    return check


def _finished(running: dict[str, asyncio.Future[str]], name: str, done: asyncio.Future[str]) -> None:
    if running.get(name) is done:
        del running[name]
    if not done.cancelled():
        done.exception()  # retrieved: a check nobody awaits any more does not log "never retrieved"


async def _state(name: str) -> str:
    timeout = float(mcp_oauth_settings.READINESS_CHECK_TIMEOUT_SECONDS)
    try:
        return await asyncio.wait_for(asyncio.shield(_running(name)), timeout)
    except TimeoutError:
        logger.warning("readiness check %s: no answer within %.1f s", name, timeout)
    except Exception as exc:  # noqa: BLE001 - a dependency that raises is down, never a 500
        logger.warning("readiness check %s: %s: %s", name, type(exc).__name__, exc)
    return "down"


def liveness() -> tuple[int, dict[str, Any]]:
    """``(200, {"status": "alive"})``."""
    return 200, {"status": "alive"}


async def readiness() -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of the readiness probe (see the module docstring)."""
    if drain.is_draining():
        return 503, {"status": "draining"}
    names = [name for name in mcp_oauth_settings.READINESS_CHECKS if name in CHECKS]
    states = await asyncio.gather(*(_state(name) for name in names))
    checks = dict(zip(names, states, strict=True))
    if "down" in states:
        return 503, {"status": "unavailable", "checks": checks}
    return 200, {"status": "ready", "checks": checks}


def _headers(status: int, body: bytes) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"content-type", b"application/json"),
        (b"cache-control", b"no-store"),
        (b"content-length", str(len(body)).encode()),
    ]
    if status == 503:
        headers.append((b"retry-after", str(int(mcp_oauth_settings.OVERLOAD_RETRY_AFTER_SECONDS)).encode()))
    return headers


class HealthLane:
    """ASGI application: the probes and the ``lifespan`` scope here, everything else by ``app``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._signals_installed = False

    def probe(self, scope: dict[str, Any]) -> str | None:
        """``"liveness"``, ``"readiness"`` or None for the scope's path."""
        path = http_path(scope)
        if path is None:
            return None
        if path == mcp_oauth_settings.LIVENESS_PATH:
            return "liveness"
        if path == mcp_oauth_settings.READINESS_PATH:
            return "readiness"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self.lifespan(receive, send)
            return
        if not self._signals_installed and kind == "http":
            # The server ran without a lifespan (uvicorn --lifespan off): chain the handler now.
            self._signals_installed = True
            drain.install()
        if kind == "http" and drain.is_draining():
            send = _closing(send)
        probe = self.probe(scope)
        if probe is None:
            await self.app(scope, receive, send)
            return
        method = scope.get("method")
        if method not in ("GET", "HEAD"):
            body = b'{"error":"method_not_allowed"}'
            headers = [*_headers(405, body), (b"allow", b"GET, HEAD")]
            status = 405
        else:
            status, payload = liveness() if probe == "liveness" else await readiness()
            body = json.dumps(payload, separators=(",", ":")).encode()
            headers = _headers(status, body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})

    async def lifespan(self, receive: Any, send: Any) -> None:
        """ASGI lifespan: chain the drain handler at startup; nothing to release at shutdown
        (Django's own handler does not speak lifespan)."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._signals_installed = True
                drain.install()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def _closing(send: Any) -> Any:
    """``send`` that adds ``Connection: close`` to the response head (RFC 9112 §9.6): while the
    worker drains, a client that is sending requests moves to a new connection (another worker)
    after its current response, instead of keeping a keep-alive connection that the server's
    shutdown would close under a request on its way (which the client gets no answer to)."""

    async def closing_send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
        await send(message)

    return closing_send


def health_lane(app: Any) -> HealthLane:
    """Wrap a site's ASGI application with the probes and the drain hook (outermost wrapper)."""
    return HealthLane(app)


def _response(status: int, payload: dict[str, Any]) -> HttpResponse:
    response = HttpResponse(json.dumps(payload, separators=(",", ":")), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    if status == 503:
        response["Retry-After"] = str(int(mcp_oauth_settings.OVERLOAD_RETRY_AFTER_SECONDS))
    return response


def _allowed(request: HttpRequest) -> HttpResponse | None:
    if request.method in ("GET", "HEAD"):
        return None
    response = _response(405, {"error": "method_not_allowed"})
    response["Allow"] = "GET, HEAD"
    return response


async def liveness_view(request: HttpRequest) -> HttpResponse:
    """The liveness probe through the URLconf (a site without :func:`health_lane`)."""
    return _allowed(request) or _response(*liveness())


async def readiness_view(request: HttpRequest) -> HttpResponse:
    """The readiness probe through the URLconf (a site without :func:`health_lane`)."""
    return _allowed(request) or _response(*await readiness())
