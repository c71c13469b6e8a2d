"""Server-Sent Events for the MCP endpoint (MCP 2025-11-25 "Transports": "Sending Messages to the
Server", "Listening for Messages from the Server", "Resumability and Redelivery"; WHATWG HTML §9.2).

Two kinds of stream, both async generators of ``bytes`` for a
``StreamingHttpResponse`` (ASGI only):

* :func:`request_stream` answers one POSTed request (``tools/call``): the
  notifications and server-to-client requests the tool sends while it runs,
  then its JSON-RPC response, then the stream closes. Event ids are
  ``"r<nonce>-<n>"``: unique in the session and never mistaken for an outbox
  id. Such a stream is not resumable (a GET with one of its ids as
  ``Last-Event-ID`` is refused with 400, so a client gives up quickly). A
  disconnect does not cancel the tool ("Disconnection SHOULD NOT be interpreted
  as the client cancelling its request"): the stream waits for it and drops its output.
* :func:`outbox_stream` is the session's GET stream: it reads the session's
  outbox (:mod:`~mcp_oauth.mcp_server.transport.sessions`) when woken by a new row
  (:mod:`~mcp_oauth.mcp_server.transport.wakeup`; without a shared wake-up channel it polls every
  ``SSE_POLL_INTERVAL_SECONDS``), holding no database connection in between, and sends each row as an event with id ``"<row id>"``, in order, starting after
  ``Last-Event-ID``; it ends when the session ends (DELETE, expiry) or the client goes.
  Under the lean ASGI lane (:mod:`.asgi`) the same stream, same bytes, is served on ASGI
  messages by :mod:`.stream_lane` instead, which keeps far less per idle stream; the view's
  response says where it starts (:class:`OutboxCursor`).

Both send a ``: keepalive`` comment after ``SSE_KEEPALIVE_SECONDS`` of silence.

**When the worker drains** (:mod:`mcp_oauth.mcp_server.transport.drain`, on SIGTERM): a GET stream ends with
``retry: <DRAIN_RETRY_MILLISECONDS>`` (:func:`drain_retry`; WHATWG HTML §9.2.6: the reconnection
time) and the client resumes it elsewhere with ``Last-Event-ID`` (nothing lost: the outbox is the
record); so does a ``subscriptions/listen`` stream (``ResponseChannel(close_on_drain=True)``;
2026-07-28 has no resumability, the client listens again and re-reads what it caches). A POST
stream of any other request is *not* closed: its events are not stored (2025-11-25 request
streams are not resumable, 2026-07-28 has no resumability), so closing it would lose its
response. It finishes within the server's graceful timeout, a tool waiting for an elicitation
answer included: the answer may be POSTed to another worker, which stores it and publishes the
wake-up that reaches the waiting tool here (:func:`~.wakeup.wait_for_answer`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.transport import drain, wakeup
from mcp_oauth.mcp_server.transport.jsonrpc import dumps
from mcp_oauth.mcp_server.transport.sessions import read_outbox, touch_session
from mcp_oauth.settings import mcp_oauth_settings

logger = logging.getLogger("mcp_oauth.transport")

KEEPALIVE = b": keepalive\n\n"


def drain_retry() -> bytes:
    """The last bytes of a stream closed because its worker drains: an SSE ``retry`` field
    (``DRAIN_RETRY_MILLISECONDS``) in an event without data, which sets the client's reconnection
    time and dispatches nothing (WHATWG HTML §9.2.6)."""
    return f"retry: {int(mcp_oauth_settings.DRAIN_RETRY_MILLISECONDS)}\n\n".encode()


def format_event(event_id: str | None, message: Any) -> bytes:
    """One SSE ``message`` event carrying ``message`` as JSON (ids never contain CR/LF)."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: message\ndata: {dumps(message)}\n\n".encode()


async def request_stream(
    run: Callable[[Callable[[dict[str, Any]], Awaitable[None]]], Awaitable[dict[str, Any] | None]],
    *,
    keepalive_seconds: float,
    on_task: Callable[[asyncio.Task], None] | None = None,
) -> AsyncIterator[bytes]:
    """Stream the messages of one request.

    :param run: ``await run(sink)`` performs the request, calling ``await sink(message)``
        for every message to send before the response, and returns the final JSON-RPC
        response (or None to close without one, e.g. after a cancellation).
    :param on_task: called with the task running ``run`` (for cancellation bookkeeping).
    """
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def sink(message: dict[str, Any]) -> None:
        queue.put_nowait(("message", message))

    task = asyncio.ensure_future(run(sink))
    task.add_done_callback(lambda done: queue.put_nowait(("done", done)))
    if on_task is not None:
        on_task(task)
    nonce = secrets.token_hex(6)
    count = 0
    try:
        while True:
            try:
                kind, item = await asyncio.wait_for(queue.get(), timeout=keepalive_seconds)
            except TimeoutError:
                yield KEEPALIVE
                continue
            if kind == "message":
                count += 1
                yield format_event(f"r{nonce}-{count}", item)
                continue
            if item.cancelled():
                return
            exc = item.exception()
            if exc is not None:
                logger.error("request stream task failed", exc_info=exc)
                return
            final = item.result()
            if final is not None:
                count += 1
                yield format_event(f"r{nonce}-{count}", final)
            return
    finally:
        if not task.done():
            # The client went away (or stopped reading). That is not a cancellation
            # (only notifications/cancelled is): let the request finish inside this
            # request's context, where its thread-sensitive ORM calls still work,
            # and drop what it would have sent.
            logger.info("client left a request stream; letting the request finish")
            try:
                await asyncio.shield(task)
            except BaseException:  # noqa: BLE001 - its outcome has nowhere to go
                pass


# One pair of sync wrappers for every stream (an idle stream keeps no objects of its own for them):
# ``await read_outbox_released(session_id, after_id, limit)`` -> ``(rows, live)`` and
# ``await touch_session_released(session_id)``, each one thread hop that gives the database
# connection back to the pool before returning.
read_outbox_released = sync_to_async(wakeup.released(read_outbox), thread_sensitive=True)
touch_session_released = sync_to_async(wakeup.released(touch_session), thread_sensitive=True)


class OutboxCursor(NamedTuple):
    """Where a session's GET stream starts: its session and the last row id the client has
    (``Last-Event-ID``, 0 for none). The view's SSE response carries it as ``outbox_cursor`` so
    that an ASGI lane can serve the stream itself (:mod:`.stream_lane`)."""

    session_id: str
    after: int


async def outbox_stream(
    session_id: str,
    after_id: int,
    *,
    poll_seconds: float,
    keepalive_seconds: float,
    batch: int = 100,
) -> AsyncIterator[bytes]:
    """Stream the session's outbox rows with ``id > after_id`` in id order, then new rows as they come."""
    yield b": stream open\n\n"
    last_id = after_id
    last_sent = last_touch = time.monotonic()
    poll, touch = read_outbox_released, touch_session_released
    # Woken by a push (wakeup.py) when one reaches every process; else polled every poll_seconds.
    push = wakeup.hub.shared
    touch_every = max(keepalive_seconds, float(mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS) / 4)
    with wakeup.hub.subscribe(wakeup.session_topic(session_id)) as doorbell:
        woken = True
        while True:
            if drain.is_draining():  # the hub woke every waiter: the client resumes elsewhere
                yield drain_retry()
                return
            if woken:
                rows, live = await poll(session_id, last_id, batch)
                if not live:
                    return
                for row_id, message in rows:
                    last_id = row_id
                    yield format_event(str(row_id), message)
                if rows:
                    last_sent = time.monotonic()
                    if len(rows) == batch:
                        continue
            now = time.monotonic()
            if now - last_sent >= keepalive_seconds:
                if now - last_touch >= touch_every:
                    if not await touch(session_id):
                        return  # ended, and its wake-up did not reach this process
                    last_touch = now
                last_sent = now
                yield KEEPALIVE
            wait = keepalive_seconds - (now - last_sent) if push else poll_seconds
            woken = await doorbell.wait(max(wait, 0.001)) or not push


class ResponseChannel:
    """The response of one POSTed request whose handler may stream (ASGI).

    The handler runs as a task (:meth:`start`); what it sends goes through :meth:`send` (the
    ``call.sink``), and :meth:`open` says "answer with SSE now" (legacy ``tools/call`` opens
    before running the tool). The front end awaits :meth:`first`: the end of the handler
    before any message or ``open`` becomes a plain JSON response (with its error's HTTP
    status); anything else commits to ``text/event-stream`` and :meth:`events` streams the
    rest, with ``: keepalive`` comments, then the final JSON-RPC response.

    :param event_ids: give SSE events ids (``"r<nonce>-<n>"``; 2025-11-25). 2026-07-28 streams
        have no ids (no resumability).
    :param cancel_on_close: a client closing the stream cancels the handler (2026-07-28:
        closing is cancellation); otherwise the handler finishes and its output is dropped.
    :param close_on_drain: when the worker drains, end the stream with ``retry:``
        (:func:`drain_retry`) instead of waiting for the handler: a stream with no final response
        to lose (``subscriptions/listen``). The handler is cancelled with it.
    """

    def __init__(self, *, event_ids: bool = True, cancel_on_close: bool = False, close_on_drain: bool = False) -> None:
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.event_ids = event_ids
        self.cancel_on_close = cancel_on_close
        self.close_on_drain = close_on_drain
        self._opened = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def _drained(self) -> None:
        """A :func:`mcp_oauth.mcp_server.transport.drain.add_listener` callback (from any thread)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, ("drain", None))

    async def send(self, message: dict[str, Any]) -> None:
        self.queue.put_nowait(("message", message))

    def open(self) -> None:
        if not self._opened:
            self._opened = True
            self.queue.put_nowait(("open", None))

    def start(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        """Run the handler as a task in a fresh context: the task outlives the view, and the
        view's context may hold the executor of a sync middleware's ``async_to_sync`` bridge,
        which is gone by the time the handler's ``sync_to_async`` calls would use it
        ("CurrentThreadExecutor already quit")."""
        self.task = asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
        self.task.add_done_callback(lambda done: self.queue.put_nowait(("done", done)))
        return self.task

    async def first(self, timeout: float | None) -> tuple[str, Any] | None:
        """The first sign from the handler, or None when ``timeout`` seconds passed without one.

        Awaited in the caller's task under ``asyncio.timeout`` (``wait_for`` would run the
        queue read as a task of its own: one more task per request)."""
        if not self.queue.empty():
            return self.queue.get_nowait()
        try:
            async with asyncio.timeout(timeout):
                return await self.queue.get()
        except TimeoutError:
            return None

    async def events(self, first: tuple[str, Any] | None, *, keepalive_seconds: float) -> AsyncIterator[bytes]:
        """The SSE body: ``first`` (as returned by :meth:`first`), then everything that follows."""
        assert self.task is not None
        nonce = secrets.token_hex(6)
        count = 0

        def event(message: Any) -> bytes:
            nonlocal count
            count += 1
            return format_event(f"r{nonce}-{count}" if self.event_ids else None, message)

        pending = first
        if self.close_on_drain:
            self._loop = asyncio.get_running_loop()
            drain.add_listener(self._drained)
        try:
            if pending is None:
                yield KEEPALIVE
            while True:
                if pending is None:
                    try:
                        pending = await asyncio.wait_for(self.queue.get(), timeout=keepalive_seconds)
                    except TimeoutError:
                        yield KEEPALIVE
                        continue
                kind, item = pending
                pending = None
                if kind == "open":
                    continue
                if kind == "drain":
                    self.task.cancel()  # nothing of it is lost: it has no final response
                    yield drain_retry()
                    return
                if kind == "message":
                    yield event(item)
                    continue
                if item.cancelled():
                    return
                exc = item.exception()
                if exc is not None:
                    logger.error("request stream task failed", exc_info=exc)
                    return
                final = item.result()
                if isinstance(final, tuple):  # (message, HTTP status): the status is moot once streaming
                    final = final[0]
                if final is not None:
                    yield event(final)
                return
        finally:
            if self.close_on_drain:
                drain.remove_listener(self._drained)
            if not self.task.done():
                if self.cancel_on_close:
                    self.task.cancel()
                else:
                    logger.info("client left a request stream; letting the request finish")
                try:
                    await asyncio.shield(self.task)
                except BaseException:  # noqa: BLE001 - its outcome has nowhere to go
                    pass
