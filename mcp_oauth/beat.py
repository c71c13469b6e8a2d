"""Celery beat once per deployment: a scheduler that sends the periodic tasks only while it holds
the deployment's beat lease.

Several hosts may each run beat by mistake (or on purpose, as a standby). With
``beat_scheduler = "mcp_oauth.beat:SingleBeatScheduler"`` (``CELERY_BEAT_SCHEDULER`` in a Django
settings namespace), the lease is a PostgreSQL session-level advisory lock (:data:`LEASE_KEY`) on the
shared database, taken on a connection of the scheduler's own:

* the beat that holds it schedules as Celery's :class:`~celery.beat.PersistentScheduler` does;
* a beat that finds it held logs one warning, ``{"event": "beat.standby", …}`` naming the holder's
  address and backend pid, sends nothing, and asks again every :attr:`SingleBeatScheduler.lease_retry`
  seconds: when the holder dies, its connection ends, PostgreSQL releases the lock, and the standby
  logs ``beat.lease_acquired`` and takes over.

A lost connection to the database loses the lease (the scheduler stops sending until it gets it
again). On another database than PostgreSQL there is no shared lease: the scheduler always sends
(one machine, one beat).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from celery.beat import PersistentScheduler
from django.db import connection

__all__ = ["LEASE_KEY", "BeatLease", "SingleBeatScheduler"]

log = logging.getLogger(__name__)

#: The advisory lock key of the beat lease ("mcpb"); one per database, so one per deployment.
LEASE_KEY = 0x6D63_7062
#: Connection parameters Django adds for its own cursors, not for a plain connection.
_DJANGO_ONLY = ("cursor_factory", "context", "prepare_threshold")


def _driver() -> Any:
    """The DB-API module of the default database's backend (psycopg on PostgreSQL)."""
    return getattr(connection, "Database")  # noqa: B009 - set by each backend's DatabaseWrapper, not typed


class BeatLease:
    """The beat lease on PostgreSQL: :meth:`held` answers whether this process holds it now,
    taking it when free. ``holder()`` describes the session holding it (for the warning)."""

    def __init__(self) -> None:
        self._conn: Any = None

    def _connect(self) -> Any:
        params = {k: v for k, v in connection.get_connection_params().items() if k not in _DJANGO_ONLY}
        # keepalives: a host that vanishes without closing its socket frees the lease in about a minute
        params.update(autocommit=True, keepalives=1, keepalives_idle=15, keepalives_interval=5, keepalives_count=3)
        return _driver().connect(**params)

    def held(self) -> bool:
        """Whether this process holds the lease (taken now if free). False while the database
        cannot be reached (the lease is then not known to be ours)."""
        if connection.vendor != "postgresql":
            return True
        try:
            if self._conn is None or self._conn.closed:
                self._conn = self._connect()
            row = self._conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() "
                "AND objid = %s AND granted",
                [LEASE_KEY],
            ).fetchone()
            if row[0]:
                return True
            return bool(self._conn.execute("SELECT pg_try_advisory_lock(%s)", [LEASE_KEY]).fetchone()[0])
        except _driver().Error:
            self.release()
            return False

    def holder(self) -> dict[str, Any]:
        """``{"pid": backend pid, "address": client address}`` of the session holding the lease, or ``{}``."""
        try:
            row = self._conn.execute(
                "SELECT l.pid, host(a.client_addr) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.objid = %s AND l.granted",
                [LEASE_KEY],
            ).fetchone()
        except (AttributeError, _driver().Error):
            return {}
        return {"pid": row[0], "address": row[1]} if row else {}

    def release(self) -> None:
        """Close the lease's connection (PostgreSQL releases the lock with it)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except _driver().Error:
                pass
            self._conn = None


class SingleBeatScheduler(PersistentScheduler):
    """:class:`~celery.beat.PersistentScheduler` that sends only while it holds the :class:`BeatLease`."""

    #: Seconds between two attempts of a standby beat to take the lease.
    lease_retry = 5.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.lease = BeatLease()
        self._standby = False
        super().__init__(*args, **kwargs)

    def tick(self, *args: Any, **kwargs: Any) -> float:
        if not self.lease.held():
            if not self._standby:
                self._standby = True
                record = {"event": "beat.standby", "holder": self.lease.holder(), "retry_seconds": self.lease_retry}
                log.warning(
                    "another Celery beat holds this deployment's beat lease: not scheduling (standby) %s",
                    json.dumps(record),
                )
            return self.lease_retry
        if self._standby:
            self._standby = False
            log.warning(
                "Celery beat took the deployment's beat lease: scheduling %s", '{"event": "beat.lease_acquired"}'
            )
        return super().tick(*args, **kwargs)

    def close(self) -> None:
        super().close()
        self.lease.release()
