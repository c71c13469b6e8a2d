"""The CIMD fetch task (mcp_oauth.authorization_server.cimd.tasks): a stale task with a foreign lease does nothing; a broker failure falls back to fetching in process; a request waits for the worker that fetches."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from mcp_oauth.authorization_server.cimd import leased_fetch
from mcp_oauth.models import ClientMetadataDocument
from tests.mcp_oauth.authorization_server.cimd.test_oauth2_validator import (
    authorize,
    logged_in,  # noqa: F401 - fixtures
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_stale_task_with_a_foreign_lease_does_nothing(cimd_env, db):
    client_id = cimd_env.publish()
    ClientMetadataDocument.objects.create(client_id=client_id, lease_token="mine", lease_expires_at=timezone.now())
    assert leased_fetch.perform_fetch(client_id, "not-mine") == "skipped"
    assert cimd_env.server.fetches() == []
    assert leased_fetch.perform_fetch(client_id, "mine") == "fetched"
    assert len(cimd_env.server.fetches()) == 1


def test_broker_failure_falls_back_to_fetching_in_process(cimd_env, logged_in, monkeypatch):
    from kombu.exceptions import OperationalError

    from mcp_oauth.authorization_server.cimd import tasks

    def broker_down(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(tasks.fetch_client_metadata, "delay", broker_down)
    client_id = cimd_env.publish()
    assert authorize(logged_in, client_id).status_code == 200
    assert len(cimd_env.server.fetches()) == 1


@pytest.mark.django_db(transaction=True)
def test_request_waits_for_a_worker_that_fetches(cimd_env, client, user, resource, monkeypatch):
    """Non-eager Celery: the request enqueues, a worker (a thread here) fetches, the request waits and succeeds."""
    from mcp_oauth.authorization_server.cimd import tasks

    worker_threads = []

    def enqueue(client_id, token, ip):
        def work():
            from django.db import connection

            try:
                cimd_env.server.stopping.wait(0.3)  # the request is already waiting on the row
                tasks.fetch_client_metadata.run(client_id, token, ip)
            finally:
                connection.close()

        thread = threading.Thread(target=work)
        worker_threads.append(thread)
        thread.start()

    monkeypatch.setattr(tasks.fetch_client_metadata, "delay", enqueue)
    client.force_login(user)
    client_id = cimd_env.publish()
    response = authorize(client, client_id)
    for thread in worker_threads:
        thread.join(timeout=10)
    assert response.status_code == 200, response.content[-600:]
    assert len(worker_threads) == 1 and len(cimd_env.server.fetches()) == 1
