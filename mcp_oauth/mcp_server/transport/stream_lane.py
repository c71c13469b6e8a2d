"""The session GET stream served straight on ASGI messages (MCP 2025-11-25 "Transports":
"Listening for Messages from the Server", "Resumability and Redelivery"; WHATWG HTML §9.2).

A session's GET stream is open for hours and idle nearly all the time, so what it keeps between
two events is what a worker pays per client. Under Django's handler an idle stream keeps its
``ASGIRequest``, its ``StreamingHttpResponse``, an async generator and two tasks. The lean lane
(:mod:`.asgi`) serves a GET with :func:`serve_get` instead:

1. **Open**: the same view as every other request (:data:`~.views.mcp_endpoint`: Origin, bearer
   token, 405 for 2026-07-28, 406, protocol version, session 404, ``Last-Event-ID`` 400, CORS),
   so every check and every error answer is the view's. An error response is sent as it is.
   When the view opens the stream, its response carries an :class:`~.views.OutboxCursor`
   (session id, resume point): the lane sends the response's status and headers, then drops the
   request and response objects.
2. **Idle**: one :class:`OutboxStreamer` (``__slots__``) per stream, registered with the
   process's wake-up hub (:mod:`.wakeup`: one Redis pub/sub or PostgreSQL ``LISTEN``
   connection per process fans out to the waiters by topic), one timer (keepalive, or the poll
   interval without a shared wake-up channel), and the request's own coroutine waiting in
   ``receive()`` for ``http.disconnect``. No task, no thread, no database connection, no query.
3. **Events**: a wake-up or the timer starts one short writer task, which reads the outbox
   (one thread hop; the connection goes back to the pool at once), sends the rows as SSE events
   (``id: <row id>``) in one ``http.response.body`` message, sends ``: keepalive`` after
   ``SSE_KEEPALIVE_SECONDS`` of silence, touches the session now and then so that an open stream
   keeps it alive, and ends. When the session is gone (DELETE, expiry) it ends the response.
4. **Drain**: when the worker is told to stop (:mod:`mcp_oauth.mcp_server.transport.drain`), the hub wakes every
   stream; a woken writer that finds the process draining sends ``retry: <DRAIN_RETRY_MILLISECONDS>``
   and ends the response without reading the outbox. The client reconnects (to another worker:
   this one no longer accepts) with ``Last-Event-ID``, and the outbox replays what it had not
   received: nothing is lost. A stream opened while the worker drains ends the same way.

The bytes on the wire are those of :func:`~.sse.outbox_stream` (which serves the same stream
under Django's own ASGI handler): ``: stream open``, then the outbox rows after
``Last-Event-ID``, then new rows and keepalives.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.cache import caches
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIRequest, get_script_prefix
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.urls import set_script_prefix

from mcp_oauth.mcp_server.transport import drain, wakeup
from mcp_oauth.mcp_server.transport.security_headers import add_security_headers
from mcp_oauth.mcp_server.transport.sse import (
    KEEPALIVE,
    drain_retry,
    format_event,
    read_outbox_released,
    touch_session_released,
)
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.overload import is_unavailable_error, unavailable_response

__all__ = ["OutboxStreamer", "serve_get"]

logger = logging.getLogger("mcp_oauth.transport")

#: Outbox rows read (and sent in one body message) per read.
BATCH = 100

_STREAM_OPEN = {"type": "http.response.body", "body": b": stream open\n\n", "more_body": True}
_KEEPALIVE = {"type": "http.response.body", "body": KEEPALIVE, "more_body": True}


async def serve_get(lane: Any, scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Serve one GET of the MCP endpoint on ``lane`` (an :class:`~.asgi.McpLane`)."""
    # The view runs in a context of its own, dropped with it: what it leaves in context-local
    # storage (the script prefix, cache handles) must not stay with a stream that lives for hours.
    streamer = await asyncio.get_running_loop().create_task(_open(lane, scope, receive, send), context=_setup_context())
    if streamer is None:
        return
    try:
        streamer.start()
        while (await receive())["type"] != "http.disconnect":
            pass
    finally:
        streamer.close()
        await signals.request_finished.asend(sender=lane.__class__)


_template: contextvars.Context | None = None


def _setup_context() -> contextvars.Context:
    """A context for one GET's view, copied from a per-process template that holds the
    process's cache handles (``django.core.cache.caches``).

    Django keeps cache handles per context under ASGI: a fresh context would build a new
    ``RedisCache`` (its own connection pool and Redis connection) for every GET, and keep it as
    long as the context lives. Copies of the template share the template's handles (the
    sync steps run on the one thread-sensitive thread; redis-py pools are thread-safe); what a
    view adds goes into its own copy only.
    """
    global _template
    if _template is None:
        template = contextvars.Context()
        template.run(_open_caches)
        _template = template
    return _template.copy()


def _open_caches() -> None:
    for alias in settings.CACHES:
        caches[alias]


async def _open(lane: Any, scope: dict[str, Any], receive: Any, send: Any) -> OutboxStreamer | None:
    """Run the view; send an error answer whole, or the head of the stream.

    :returns: the stream's :class:`OutboxStreamer` (not started), or None when the answer is
        complete (an error) or the client left before it.
    """
    try:
        body_file = await lane.read_body(receive)
    except RequestAborted:
        return None
    try:
        set_script_prefix(get_script_prefix(scope))
        try:
            request = ASGIRequest(scope, body_file)
        except UnicodeDecodeError:
            response: HttpResponseBase = HttpResponse(status=400)
        else:
            response = await _answer(lane.view, request)
        add_security_headers(response)  # the headers of any response
        cursor = getattr(response, "outbox_cursor", None)
        if cursor is None:
            await lane.send_response(response, send)
            await sync_to_async(response.close)()  # request_finished: connections back to the pool
            return None
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": [(key.encode("ascii"), value.encode("latin1")) for key, value in response.items()],
            }
        )
        await send(_STREAM_OPEN)
        # The response (and the view's generator, never started) goes now: the streamer is all that stays.
        return OutboxStreamer(cursor.session_id, cursor.after, send)
    finally:
        body_file.close()


async def _answer(view: Any, request: ASGIRequest) -> HttpResponseBase:
    """The view's response; a failure becomes 503 (database or cache away) or a JSON-RPC 500."""
    try:
        return await view(request)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # every failure gets a defined answer
        if is_unavailable_error(exc):
            logger.warning("answering 503: %s: %s", type(exc).__name__, exc)
            return unavailable_response()
        logger.error("MCP endpoint failed", exc_info=exc)
        return HttpResponse(
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}',
            status=500,
            content_type="application/json",
        )


class OutboxStreamer:
    """The state of one open GET stream between events (and its wake-up subscription).

    :param session_id: the session whose outbox is streamed.
    :param after: the last outbox row id the client has (``Last-Event-ID``; 0 for none).
    :param send: the ASGI ``send`` of the response (its head already sent).

    Times are ``time.monotonic()`` seconds. At most one writer task runs at a time; a wake-up
    that comes while it runs makes it read once more before it ends.
    """

    __slots__ = (
        "topic",
        "session_id",
        "last_id",
        "send",
        "loop",
        "last_sent",
        "last_touch",
        "woken",
        "writer",
        "timer",
        "closed",
    )

    def __init__(self, session_id: str, after: int, send: Any) -> None:
        self.topic = wakeup.session_topic(session_id)
        self.session_id = session_id
        self.last_id = after
        self.send = send
        self.loop = asyncio.get_running_loop()
        self.last_sent = self.last_touch = time.monotonic()
        self.woken = True  # the first read: the rows after Last-Event-ID
        self.writer: asyncio.Task | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    def start(self) -> None:
        """Subscribe to the session's wake-ups, then read (subscribing first loses none)."""
        wakeup.hub.add_waiter(self)
        self.kick()

    def close(self) -> None:
        """The response is over (client gone, or the session ended): stop everything."""
        self.closed = True
        wakeup.hub.remove_waiter(self)
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.writer is not None:
            self.writer.cancel()
            self.writer = None

    # --- called by the wake-up hub (any thread) and by the timer (event loop) ---------------

    def _set_threadsafe(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._woken)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def _woken(self) -> None:
        self.woken = True
        self.kick()

    def _on_timer(self) -> None:
        self.timer = None
        if not wakeup.hub.shared:
            self.woken = True  # no shared wake-up channel: poll
        self.kick()

    def kick(self) -> None:
        """Start the writer unless it runs (it reads again before ending when ``woken``)."""
        if self.writer is None and not self.closed:
            # A fresh context: the writer must not share asgiref's per-context state (the
            # thread-sensitive bookkeeping) with whoever kicked it.
            self.writer = self.loop.create_task(self._write(), context=contextvars.Context())

    # --- the writer -------------------------------------------------------------------------

    async def _write(self) -> None:
        if drain.is_draining():
            # The worker stops: the client reconnects elsewhere and resumes from last_id.
            self.writer = None
            await self._end(drain_retry())
            return
        try:
            ended = await self._deliver()
        except asyncio.CancelledError:
            return
        except Exception as exc:  # noqa: BLE001 - the stream ends; the client resumes with Last-Event-ID
            logger.warning("GET stream of session %s ends: %s: %s", self.session_id, type(exc).__name__, exc)
            ended = True
        self.writer = None
        if self.closed:
            return
        if ended:
            await self._end(b"")
            return
        if drain.is_draining():  # began while this writer ran (its wake-up found the writer busy)
            await self._end(drain_retry())
            return
        self._schedule()

    async def _end(self, last: bytes) -> None:
        """End the response with ``last`` (its final bytes; may be empty)."""
        if self.closed:
            return
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        try:
            await self.send({"type": "http.response.body", "body": last, "more_body": False})
        except Exception:  # noqa: BLE001 - the client is gone already
            pass

    async def _deliver(self) -> bool:
        """Send what is due. :returns: True when the session is gone (the stream ends)."""
        keepalive = float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS)
        while not self.closed:
            if self.woken:
                self.woken = False
                rows, live = await read_outbox_released(self.session_id, self.last_id, BATCH)
                if not live:
                    return True
                if rows and not self.closed:
                    self.last_id = rows[-1][0]
                    body = b"".join(format_event(str(row_id), message) for row_id, message in rows)
                    await self.send({"type": "http.response.body", "body": body, "more_body": True})
                    self.last_sent = time.monotonic()
                    if len(rows) == BATCH:
                        self.woken = True
                continue
            now = time.monotonic()
            if now - self.last_sent >= keepalive:
                touch_every = max(keepalive, float(mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS) / 4)
                if now - self.last_touch >= touch_every:
                    if not await touch_session_released(self.session_id):
                        return True  # ended, and its wake-up did not reach this process
                    self.last_touch = now
                self.last_sent = now
                await self.send(_KEEPALIVE)
                continue
            return False
        return False

    def _schedule(self) -> None:
        """The next timer: the keepalive (push), or the next poll (no shared wake-up channel)."""
        if self.timer is not None:
            self.timer.cancel()
        keepalive = float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS)
        if wakeup.hub.shared:
            delay = keepalive - (time.monotonic() - self.last_sent)
        else:
            delay = min(float(mcp_oauth_settings.SSE_POLL_INTERVAL_SECONDS), keepalive)
        self.timer = self.loop.call_later(max(delay, 0.001), self._on_timer)
