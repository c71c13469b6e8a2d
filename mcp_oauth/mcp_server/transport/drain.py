"""Draining: what a worker process does between the signal that stops it and its exit.

An ASGI server stops gracefully in two steps: it stops accepting connections and lets the
responses in flight end, and only once every connection is closed does it send the ASGI
``lifespan.shutdown`` event. A long-lived SSE stream never ends by itself, so it must learn of
the shutdown earlier. uvicorn (0.55, also under gunicorn's ``uvicorn_worker.UvicornWorker``)
installs its ``SIGTERM``/``SIGINT`` handler with ``signal.signal`` when it starts serving, before
it sends ``lifespan.startup``; :func:`install` (called by :func:`mcp_oauth.health.health_lane`
on ``lifespan.startup``) chains a handler in front of it. On the signal that handler:

1. :func:`begin` on the event loop: the process is *draining*. :func:`is_draining` turns true
   (the readiness probe answers 503, :mod:`mcp_oauth.health`), every waiter of the wake-up hub
   is woken once (:meth:`~mcp_oauth.mcp_server.transport.wakeup.WakeupHub.wake_all_local`: the session GET
   streams, which then end with an SSE ``retry:`` field, :mod:`~mcp_oauth.mcp_server.transport.stream_lane`)
   and every callback registered with :func:`add_listener` runs (``subscriptions/listen``
   streams end the same way, :class:`~mcp_oauth.mcp_server.transport.sse.ResponseChannel`). Push, not
   polling: nothing looks at the flag on a timer.
2. ``MCP_OAUTH["DRAIN_DELAY_SECONDS"]`` later (0 by default), the worker stops accepting (when
   the whole server stops, without resetting a connection the kernel already completed:
   :mod:`~mcp_oauth.mcp_server.transport.listening`) and, :data:`ACCEPT_GRACE_SECONDS` later,
   the server's own handler runs: uvicorn closes idle
   keep-alive connections, waits for the responses in flight (POSTed requests finish, a tool
   waiting for an elicitation answer included), then exits.
   A delay keeps the worker serving while a load balancer's readiness probe notices the 503
   (the Kubernetes ``preStop`` pattern); gunicorn's rolling restart needs none (its new workers
   accept on the same listening socket).

A second ``SIGINT`` during the delay is handed to the server at once (Ctrl-C twice: uvicorn
stops accepting now; a third forces the exit). A second ``SIGTERM`` is the same stop told again and
changes nothing: a stop of the whole process group (systemd's ``KillMode=control-group``, ``kill
-TERM -<pgid>``) reaches a gunicorn worker twice, directly and relayed by its master at once, and
the relay must not cut the delay short. Handlers are installed from the main thread only (a server
running in a thread, as in some tests, keeps its own).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from mcp_oauth.mcp_server.transport.listening import refuse_new_connections, shared_with_parent
from mcp_oauth.mcp_server.transport.wakeup import hub
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["add_listener", "begin", "install", "is_draining", "remove_listener", "reset"]

logger = logging.getLogger("mcp_oauth.drain")

#: The signals a server stops on gracefully (uvicorn's HANDLED_SIGNALS).
SIGNALS = (signal.SIGTERM, signal.SIGINT)

#: Seconds between closing the listening sockets and the server's own shutdown (see ``_ChainedHandler.stop``).
ACCEPT_GRACE_SECONDS = 0.25

_draining = False
_listeners: set[Callable[[], None]] = set()
_lock = threading.Lock()


def is_draining() -> bool:
    """True once this process was told to stop (its readiness probe answers 503)."""
    return _draining


def add_listener(callback: Callable[[], None]) -> None:
    """Call ``callback()`` (on the event loop, no argument) when draining begins; at once when
    it began already. Remove it with :func:`remove_listener` when the stream ends."""
    with _lock:
        _listeners.add(callback)
    if _draining:
        callback()


def remove_listener(callback: Callable[[], None]) -> None:
    """Forget ``callback`` (no error when it is not registered)."""
    with _lock:
        _listeners.discard(callback)


def begin() -> None:
    """Start draining (idempotent): readiness 503, open streams told to end with ``retry:``."""
    global _draining
    if _draining:
        return
    _draining = True
    logger.warning("draining: readiness answers 503, open streams end with a retry hint")
    hub.wake_all_local()
    with _lock:
        callbacks = list(_listeners)
    for callback in callbacks:
        try:
            callback()
        except Exception:  # one stream's failure must not keep the others open
            logger.exception("drain listener failed")


def reset() -> None:
    """Back to serving (tests; a process never undrains)."""
    global _draining
    _draining = False


class _ChainedHandler:
    """The signal handler put in front of the server's own (``previous``). ``told``: the signals
    received so far, shared by the handlers of one :func:`install` (SIGTERM then SIGINT is a
    second signal too)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, previous: Callable[[int, FrameType | None], Any], told: set[int]
    ) -> None:
        self.loop = loop
        self.previous = previous
        self.told = told

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.told:
            self.told.add(signum)
            if signum != signal.SIGTERM:  # Ctrl-C again: the server decides (stop now, then force)
                self.previous(signum, frame)
            return  # SIGTERM again: the same stop (a group stop relayed by gunicorn's master)
        self.told.add(signum)
        delay = float(mcp_oauth_settings.DRAIN_DELAY_SECONDS)
        try:
            self.loop.call_soon_threadsafe(begin)
            self.loop.call_soon_threadsafe(self.loop.call_later, delay, self.stop, signum)
        except RuntimeError:  # the loop is closed: nothing to drain
            self.previous(signum, frame)

    def stop(self, signum: int) -> None:
        """Stop accepting, then hand the signal to the server.

        uvicorn's shutdown closes every connection that has no request in progress, also one
        it accepted an instant before whose request is still on its way (the client gets no
        response on a new connection). So when the server is uvicorn (the handler's ``__self__``
        has its listening ``servers``) they are closed first, and the server's own handler runs
        :data:`ACCEPT_GRACE_SECONDS` later, when such requests have arrived and are answered.
        Before the close, when nobody else will accept on the socket (the whole server stops:
        :func:`~mcp_oauth.mcp_server.transport.listening.shared_with_parent` is false), new
        handshakes are stopped and the connections already queued are accepted for
        :data:`ACCEPT_GRACE_SECONDS` (:mod:`~mcp_oauth.mcp_server.transport.listening`).
        Under gunicorn's rolling restart the listening socket is shared: the other workers go on
        accepting, and it is closed at once.
        """
        servers = getattr(getattr(self.previous, "__self__", None), "servers", None) or []
        sockets = [sock for server in servers for sock in (server.sockets or ())]
        if sockets and not any(shared_with_parent(sock) for sock in sockets):
            refused = [refuse_new_connections(sock) for sock in sockets]
            if all(refused):
                logger.info("draining: new connections refused, accepting the queued ones")
                self.loop.call_later(ACCEPT_GRACE_SECONDS, self.close, servers, signum)
                return
        self.close(servers, signum)

    def close(self, servers: list[Any], signum: int) -> None:
        """Close the listening ``servers``, then run the server's own handler (see :meth:`stop`)."""
        for listener in servers:
            try:
                listener.close()
            except Exception:  # the server's own shutdown closes it anyway
                logger.exception("could not stop accepting")
        if servers:
            self.loop.call_later(ACCEPT_GRACE_SECONDS, self.previous, signum, None)
        else:
            self.previous(signum, None)


def install(loop: asyncio.AbstractEventLoop | None = None) -> bool:
    """Chain the drain handler in front of the running server's handlers of :data:`SIGNALS`.

    Call it once the server installed its own (ASGI ``lifespan.startup``; uvicorn installs them
    before). A signal without a Python handler (default or ignored) is left alone.

    :returns: True when at least one handler was chained; False off the main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    loop = loop or asyncio.get_running_loop()
    chained = False
    told: set[int] = set()
    for signum in SIGNALS:
        previous = signal.getsignal(signum)
        if isinstance(previous, _ChainedHandler) or not callable(previous):
            chained = chained or isinstance(previous, _ChainedHandler)
            continue
        signal.signal(signum, _ChainedHandler(loop, previous, told))
        chained = True
    return chained
