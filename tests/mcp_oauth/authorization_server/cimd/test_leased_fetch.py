"""Single-flight: concurrent authorizations of one uncached client_id make exactly one outbound fetch.

The document server holds its answer for a moment so that every request arrives
while the fetch is in flight (that only makes the race likely; correctness does not
depend on it). The count is what the server saw. The several-processes test forks
worker processes (each with its own database connections, so a per-process lock
could not pass it) and needs PostgreSQL (``DATABASE_URL=postgres://…``); on SQLite
it is skipped.
"""

from __future__ import annotations

import queue
import threading
from urllib.parse import urlencode

import pytest

from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures

PROCESSES = 5
THREADS_PER_PROCESS = 10
HOLD_SECONDS = 1.0


def _authorize_url(client_id: str) -> str:
    from tests.support.oauth_helpers import pkce_pair

    _, challenge = pkce_pair()
    return "/oauth/authorize?" + urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": "http://127.0.0.1/callback",
            "state": "s",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "scope": "mcp",
        }
    )


def _run_threads(count: int, client_id: str, user_pk: int, barrier, results) -> None:
    """``count`` threads, each with its own test client and database connection, authorize at once."""
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.test import Client

    user = get_user_model().objects.get(pk=user_pk)

    def one() -> None:
        try:
            client = Client()
            client.force_login(user)
            url = _authorize_url(client_id)
            # Give the connection back (to the pool, on PostgreSQL) before waiting: a request
            # takes one when it starts, as under a server; more threads than the pool holds
            # must not sit on connections at the barrier.
            connections.close_all()
            barrier.wait(timeout=60)
            response = client.get(url)
            body = response.content.decode(errors="replace")
            results.put((response.status_code, body[-300:] if response.status_code != 200 else ""))
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
            results.put((-1, repr(exc)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)


def _worker_process(config: dict, barrier, results) -> None:
    """A forked worker process: Django, settings, fake DNS and egress guard come from the parent;
    its database connections are its own (the parent closed its connections before forking)."""
    from django.db import connections

    try:
        _run_threads(config["threads"], config["client_id"], config["user_pk"], barrier, results)
    finally:
        connections.close_all()


def _setup(cimd_env, user) -> str:
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    ensure_default_resource()
    client_id = cimd_env.publish()
    cimd_env.server.routes["/client.json"].delay = HOLD_SECONDS
    return client_id


def _assert_single_fetch(cimd_env, client_id, outcomes, expected):
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import ClientMetadataDocument

    assert len(outcomes) == expected
    assert [o for o in outcomes if o[0] != 200] == []
    assert len(cimd_env.server.fetches("/client.json")) == 1
    assert cimd_env.server.connections == 1
    cached = ClientMetadataDocument.objects.get(client_id=client_id)
    assert cached.fetch_count == 1 and cached.document is not None and not cached.lease_token
    assert get_application_model().objects.filter(client_id=client_id).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_threads_make_one_fetch(cimd_env, user):
    """One process, ten threads (SQLite or PostgreSQL)."""
    client_id = _setup(cimd_env, user)
    results: queue.Queue = queue.Queue()
    _run_threads(10, client_id, user.pk, threading.Barrier(10), results)
    outcomes = [results.get_nowait() for _ in range(results.qsize())]
    _assert_single_fetch(cimd_env, client_id, outcomes, 10)


@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_authorizations_in_several_processes_make_one_fetch(cimd_env, user, record_property):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("several worker processes need a shared server database: run with DATABASE_URL=postgres://…")
    import multiprocessing

    from django.db import connections
    from django.test import Client

    client_id = _setup(cimd_env, user)
    total = PROCESSES * THREADS_PER_PROCESS
    config = {"client_id": client_id, "user_pk": user.pk, "threads": THREADS_PER_PROCESS}
    # Load views, templates and DOT's server once, with a request that names no client,
    # so that the race below is between requests, not between imports.
    warm = Client()
    warm.force_login(user)
    warm.get("/oauth/authorize")
    connections.close_all()  # no connection may be shared with the children
    for conn in connections.all():  # nor a connection pool: its threads do not survive fork()
        if hasattr(conn, "close_pool"):
            conn.close_pool()
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(total)
    results = context.Queue()
    workers = [context.Process(target=_worker_process, args=(config, barrier, results)) for _ in range(PROCESSES)]
    for worker in workers:
        worker.start()
    try:
        outcomes = [results.get(timeout=120) for _ in range(total)]
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    record_property("cimd_fetches", len(cimd_env.server.fetches("/client.json")))
    print(
        f"\n{total} concurrent authorizations in {PROCESSES} processes -> "
        f"{len(cimd_env.server.fetches('/client.json'))} outbound fetch(es)"
    )
    _assert_single_fetch(cimd_env, client_id, outcomes, total)
    assert {worker.exitcode for worker in workers} == {0}
