"""A connection check for Django's PostgreSQL pool that costs no round trip on a healthy connection.

**Why.** psycopg_pool hands out idle connections as they are: without a ``check`` it never learns
that PostgreSQL restarted (or a proxy, a failover or a network cut closed the connections) while
they sat in the pool. Each dead connection then fails the first request it is given to
(``OperationalError: consuming input failed: server closed the connection unexpectedly``: a 503
answered after the database is back), once per connection and per worker, for as long as
requests keep finding them — with a pool of 8 per worker, many seconds after the return, and
``/readyz`` flaps while the probe draws them. ``ConnectionPool.check_connection`` fixes that but
runs an (empty) query on every checkout: one more round trip on every request that touches the
database.

**How.** :func:`check_connection` (psycopg_pool's ``check`` callback) asks the kernel, without
waiting, whether the idle connection's socket is readable. An idle PostgreSQL connection has
nothing to read unless the server closed it (end of file, often after a ``FATAL`` error such as
57P01 "terminating connection due to administrator command") or sent an asynchronous message; so
only then it runs psycopg_pool's own check (an empty query), which raises when the connection is
dead. When it is, the pool's other idle connections are swept at once (``pool.check()``: a dead
one is replaced, a live one kept) before the pool is told: otherwise each of them would fail the
check in turn, and psycopg_pool waits about 1, 2, 4… seconds between attempts of one ``getconn``.
The request that found the dead connection gets a fresh one (after about a second), not an error.

A cut that sends nothing (a host that vanished, a partition) leaves the socket silent: the query
then fails or times out as before (``statement_timeout``, TCP keepalives; 503 + ``Retry-After``,
:mod:`mcp_oauth.shared.overload`).

**Wiring.** Django (>= 5.1, ``django.db.backends.postgresql`` with ``OPTIONS["pool"]``) builds
the pool itself and passes its own ``check``: ``ConnectionPool.check_connection`` when
``CONN_HEALTH_CHECKS`` is on (a round trip per checkout), else none; a ``check`` in
``OPTIONS["pool"]`` is refused (``TypeError``, "multiple values for keyword argument"). So the app
installs this check on each pool that has none, from a ``connection_created`` receiver
(:func:`install_check`, connected at start-up by :mod:`mcp_oauth.wiring`): nothing for a site to
set, and a site with ``CONN_HEALTH_CHECKS`` keeps Django's. The first connection of a process is
taken before the receiver runs (a new connection, live). docs/how-to/production.md lists the pool
options a site sets.
"""

from __future__ import annotations

import logging
import select
import threading
from typing import Any

__all__ = ["check_connection", "connect_receivers", "install_check", "sweep"]

logger = logging.getLogger("mcp_oauth.db_pool")

_sweeping: set[int] = set()
_sweeping_lock = threading.Lock()


def _readable(fileno: int) -> bool:
    """Whether the socket has something to read (or is at end of file), without waiting.
    ``poll`` rather than ``select``: a worker holding many streams has descriptors past 1024."""
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def check_connection(conn: Any) -> None:
    """psycopg_pool ``check`` callback (see the module docstring): returns on a live connection;
    raises (``psycopg.OperationalError``) on one the server closed, after sweeping the pool.

    :param conn: a ``psycopg.Connection`` just taken from the pool, idle.
    """
    from psycopg import OperationalError
    from psycopg_pool import ConnectionPool

    if conn.closed or conn.broken:
        raise OperationalError("the pooled connection is closed")
    try:
        silent = not _readable(conn.pgconn.socket)
    except (OSError, ValueError) as exc:  # the socket is gone
        raise OperationalError(f"the pooled connection has no socket: {exc}") from exc
    if silent:
        return
    try:
        ConnectionPool.check_connection(conn)
    except Exception:
        pool = getattr(conn, "_pool", None)  # psycopg_pool's back reference (Django uses it too)
        if pool is not None:
            sweep(pool)
        raise


def sweep(pool: Any) -> None:
    """``pool.check()`` (every idle connection checked; dead ones replaced), at most one at a time
    per pool: a second caller returns at once. Never raises (a failed sweep is logged)."""
    key = id(pool)
    with _sweeping_lock:
        if key in _sweeping:
            return
        _sweeping.add(key)
    try:
        logger.warning("database connection lost: checking the pool's idle connections")
        pool.check()
    except Exception as exc:  # noqa: BLE001 - a sweep is an optimisation; the caller raises anyway
        logger.warning("pool check failed: %s: %s", type(exc).__name__, exc)
    finally:
        with _sweeping_lock:
            _sweeping.discard(key)


def install_check(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: :func:`check_connection` becomes the check of the
    connection's pool when it has none (a pooled PostgreSQL connection; others are left alone)."""
    pool = getattr(connection, "pool", None) if connection.vendor == "postgresql" else None
    if pool is not None and getattr(pool, "_check", False) is None:  # psycopg_pool's check callback
        pool._check = check_connection


def connect_receivers() -> None:
    """Connect :func:`install_check` (once; from the app's start-up wiring)."""
    from django.db.backends.signals import connection_created

    connection_created.connect(install_check, dispatch_uid="mcp_oauth.shared.db_pool.install_check")
