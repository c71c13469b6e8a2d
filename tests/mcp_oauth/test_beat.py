"""Celery beat once per deployment (mcp_oauth.beat): the lease is a PostgreSQL advisory lock held on
a connection of the scheduler's own; a second scheduler finds it held, stands by with one warning
naming the holder, and takes over when the holder's connection ends. Real database sessions; two
real beat processes: tests/topology/test_beat_lease.py."""

from __future__ import annotations

import logging
import time

import pytest
from celery import Celery
from django.db import connection

from mcp_oauth.beat import LEASE_KEY, BeatLease, SingleBeatScheduler

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("the beat lease is a PostgreSQL advisory lock")


def holders() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted", [LEASE_KEY])
        return [row[0] for row in cursor.fetchall()]


def eventually(check, seconds: float = 5.0) -> bool:
    """``check()`` until true (a closed session's locks are freed by its backend a moment after the
    client has gone), at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_one_lease_per_database(postgres):
    first, second = BeatLease(), BeatLease()
    try:
        assert first.held() is True
        assert first.held() is True  # held again, not taken twice
        assert second.held() is False
        backend = first._conn.info.backend_pid
        assert holders() == [backend]
        assert second.holder() == {"pid": backend, "address": "127.0.0.1"}
        first.release()  # the holder's connection ends: PostgreSQL frees the lock
        assert eventually(second.held)
        assert holders() == [second._conn.info.backend_pid]
    finally:
        first.release()
        second.release()
    assert eventually(lambda: holders() == [])


def test_a_lost_connection_loses_the_lease_until_taken_again(postgres):
    lease = BeatLease()
    try:
        assert lease.held()
        with connection.cursor() as cursor:  # the database ends the lease's session (a restart, a cut)
            cursor.execute("SELECT pg_terminate_backend(%s)", [lease._conn.info.backend_pid])
        assert lease.held() is False
        assert eventually(lease.held)  # a new connection takes it again
    finally:
        lease.release()


def test_a_standby_scheduler_sends_nothing_and_warns_once(postgres, tmp_path, caplog):
    app = Celery("beat-test", set_as_current=False)
    app.conf.beat_schedule = {"often": {"task": "mcp_oauth.tasks.cleanup", "schedule": 1.0}}
    holder = BeatLease()
    try:
        assert holder.held()
        scheduler = SingleBeatScheduler(app=app, schedule_filename=str(tmp_path / "schedule"), lazy=True)
        sent = []
        scheduler.apply_async = lambda entry, **kwargs: sent.append(entry.name)  # what would reach the broker
        with caplog.at_level(logging.WARNING, logger="mcp_oauth.beat"):
            assert scheduler.tick() == SingleBeatScheduler.lease_retry
            assert scheduler.tick() == SingleBeatScheduler.lease_retry
        warnings = [r.getMessage() for r in caplog.records if r.name == "mcp_oauth.beat"]
        assert len(warnings) == 1 and '"event": "beat.standby"' in warnings[0]
        assert f'"pid": {holder._conn.info.backend_pid}' in warnings[0]
        assert sent == []
        holder.release()
        assert eventually(lambda: holders() == [])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mcp_oauth.beat"):
            scheduler.setup_schedule()
            scheduler.tick()
        assert ['{"event": "beat.lease_acquired"}' in r.getMessage() for r in caplog.records] == [True]
        scheduler.close()
        assert eventually(lambda: holders() == [])
    finally:
        holder.release()
