"""The reference site's gunicorn configuration file: ``gunicorn -c python:project.gunicorn_config``
(``make serve`` runs it so). Server hooks only; the command line gives the rest.

:func:`on_starting` — **listen once a worker can serve.** gunicorn's master binds and listens
before it forks a worker, and a worker needs seconds to import the site: a connection made
meanwhile is accepted by the kernel and waits in the backlog (measured 3.6-5.8 s through a load
balancer while a restarted host booted). Here the master binds its TCP addresses (so a port in
use still fails at once, and the workers inherit the socket) without listening: a connection to
the port is refused (RST), which a balancer retries on another host since nothing was sent
(nginx ``proxy_next_upstream error``). Each uvicorn worker listens when it starts serving
(asyncio's ``create_server`` calls ``listen()`` on the socket it is given, after the ASGI
``lifespan.startup``): the first worker that can answer opens the port. In a rolling restart
(SIGHUP) the socket keeps listening: new workers join, nothing is refused.

Sockets given by systemd (``LISTEN_FDS``), by a re-executed master (``GUNICORN_FD``), per-worker
sockets (``--reuse-port``) and Unix sockets are left to gunicorn.

:func:`child_exit` — :func:`mcp_oauth.observability.metrics_gunicorn.child_exit` (a dead worker's
live metrics dropped; a no-op without ``PROMETHEUS_MULTIPROC_DIR``).

This file imports neither Django nor the site (it runs in gunicorn's master).
"""

from __future__ import annotations

import errno
import os
import socket
import time
from typing import Any

from gunicorn import util
from gunicorn.sock import TCP6Socket, TCPSocket

from mcp_oauth.observability.metrics_gunicorn import child_exit

__all__ = ["BoundSocket", "BoundSocket6", "bound", "child_exit", "on_starting"]

#: Attempts to bind an address in use, one second apart (gunicorn's own).
BIND_ATTEMPTS = 5


class BoundSocket(TCPSocket):
    """gunicorn's TCP listener, bound but not listening (a worker listens: module docstring)."""

    def set_options(self, sock: socket.socket, bound: bool = False) -> socket.socket:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as gunicorn's TCPSocket
        if not bound:
            self.bind(sock)
        sock.setblocking(False)
        sock.set_inheritable(True)
        return sock


class BoundSocket6(BoundSocket):
    """:class:`BoundSocket` for an IPv6 address."""

    FAMILY = socket.AF_INET6
    __str__ = TCP6Socket.__str__


def _inherited(server: Any) -> bool:
    return bool(
        server.LISTENERS
        or os.environ.get("LISTEN_FDS")
        or os.environ.get("GUNICORN_FD")
        or server.cfg.reuse_port
        or any(not isinstance(address, tuple) for address in server.cfg.address)
    )


def bound(address: tuple[str, int], server: Any, attempts: int = BIND_ATTEMPTS) -> BoundSocket:
    """A :class:`BoundSocket` on ``address``; an address in use is tried again every second, as
    gunicorn does (the workers of a master that was killed still hold it until they notice).
    :raises OSError: the last attempt's error."""
    kind = BoundSocket6 if util.is_ipv6(address[0]) else BoundSocket
    for attempt in range(1, attempts + 1):
        try:
            return kind(address, server.cfg, server.log)
        except OSError as exc:
            server.log.error("connection to %s failed: %s", address, exc)
            if attempt == attempts or exc.errno != errno.EADDRINUSE:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def on_starting(server: Any) -> None:
    """gunicorn hook (master, before it creates its listeners): bind the TCP addresses without
    listening (:class:`BoundSocket`); gunicorn then keeps these. :raises OSError: an address
    cannot be bound (the master exits; ``make serve`` starts it again after a backoff)."""
    if _inherited(server):
        return
    server.LISTENERS = [bound(address, server) for address in server.cfg.address]
