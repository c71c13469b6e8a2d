"""Pooled PostgreSQL connections that the server closed while they sat idle are never handed out
(mcp_oauth.shared.db_pool): a real cut (tests/support/tcp_forwarder.py), not a mock.

Without a check psycopg_pool gives each dead connection to the next caller, whose query fails
("server closed the connection unexpectedly": a 503 after the database is back). With
:func:`check_connection` every caller after the return gets a live connection at once, and a live
connection costs no round trip (no query is sent for it).

Skipped unless the test database is PostgreSQL.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool

from mcp_oauth.shared.db_pool import check_connection
from tests.support.tcp_forwarder import TcpForwarder
from tests.support.topology import database_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def forwarder():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://…)")
    with TcpForwarder(int(connection.settings_dict.get("PORT") or 5432)) as forwarder:
        yield forwarder


def pool_through(forwarder: TcpForwarder, **options) -> ConnectionPool:
    url = database_url().rsplit("@", 1)[0] + f"@127.0.0.1:{forwarder.port}/" + database_url().rsplit("/", 1)[1]
    return ConnectionPool(url, min_size=1, max_size=4, timeout=5, open=True, kwargs={"autocommit": True}, **options)


def queries_after_a_cut(pool: ConnectionPool, forwarder: TcpForwarder) -> list[str]:
    held = [pool.getconn() for _ in range(4)]
    for conn in held:
        conn.execute("SELECT 1")
        pool.putconn(conn)
    forwarder.stop()
    time.sleep(0.5)
    forwarder.start()
    outcomes = []
    for _ in range(6):
        conn = pool.getconn()
        try:
            conn.execute("SELECT 1")
            outcomes.append("ok")
        except psycopg.OperationalError:
            outcomes.append("error")
        finally:
            pool.putconn(conn)
    return outcomes


def test_without_a_check_the_dead_connections_are_handed_out(forwarder):
    with pool_through(forwarder) as pool:
        assert queries_after_a_cut(pool, forwarder).count("error") == 4


def test_with_the_check_every_caller_gets_a_live_connection(forwarder):
    with pool_through(forwarder, check=check_connection) as pool:
        started = time.monotonic()
        assert queries_after_a_cut(pool, forwarder) == ["ok"] * 6
        assert time.monotonic() - started < 4  # no backoff per dead connection (the pool was swept)


def test_a_live_connection_is_checked_without_a_query(forwarder):
    with pool_through(forwarder, check=check_connection) as pool:
        with pool.connection() as conn:
            conn.execute("SELECT 1")
        sent = []
        with pool.connection() as conn:
            before = conn.pgconn.transaction_status
            check_connection(conn)  # no query: the status and the socket are untouched
            sent.append(conn.pgconn.transaction_status == before)
        assert sent == [True]


def test_the_site_pool_gets_the_check(transactional_db):
    """Django builds the pool with no check (CONN_HEALTH_CHECKS off); the app installs this one."""
    if connection.vendor != "postgresql" or connection.pool is None:
        pytest.skip("needs PostgreSQL with Django's pool")
    connection.ensure_connection()
    connection.close()
    connection.ensure_connection()
    assert connection.pool._check is check_connection
