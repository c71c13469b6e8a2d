"""The Celery tasks on a real worker with a real broker (Redis on 127.0.0.1:6379), not eagerly.

Skipped when no Redis answers there; the embedded default (eager tasks) is covered elsewhere.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.models import McpSession, RedeemedAuthorizationCode
from tests.support.elicitation_helpers import url_session

pytestmark = pytest.mark.django_db(transaction=True)

BROKER = "redis://127.0.0.1:6379/15"


@pytest.fixture
def worker():
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(BROKER, socket_connect_timeout=1).ping()
    except Exception as exc:  # noqa: BLE001 - any connection problem means: no broker here
        pytest.skip(f"no Redis broker at {BROKER}: {exc}")
    from celery import Celery
    from celery.contrib.testing.worker import start_worker

    # A Celery app of its own: the project's app is eager in tests and caches its backend.
    app = Celery("mcp-authz-worker-test", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=BROKER, result_backend=BROKER, task_always_eager=False)
    from celery import _state

    import elicitation.tasks  # noqa: F401 - registers the shared tasks
    import mcp_oauth.tasks  # noqa: F401

    app.finalize()
    current, default = _state.get_current_app(), _state.default_app
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield app
    finally:
        # start_worker makes its app the current and default one; give the project's back.
        _state.set_default_app(default)
        current.set_current()


def test_cleanup_runs_on_a_real_worker(worker, resource, user, public_app):
    live = McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25"
    )
    McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25", ended_at=timezone.now()
    )
    RedeemedAuthorizationCode.objects.create(
        code_checksum="c" * 64, application=public_app, redeemed_at=timezone.now() - timedelta(days=3)
    )
    result = worker.tasks["mcp_oauth.tasks.cleanup"].apply_async(ignore_result=False)
    assert result.get(timeout=30) == {
        "sessions": 1,
        "redeemed_codes": 1,
        "used_assertions": 0,
        "dpop_bindings": 0,
        "token_organizations": 0,
        "token_actors": 0,
        "audit_events": 0,
        "audit_ips_cleared": 0,
        "tasks": 0,
        "cimd_documents": 0,
        "tool_calls": 0,
    }
    assert list(McpSession.objects.all()) == [live]
    assert not RedeemedAuthorizationCode.objects.exists()


@pytest.mark.parametrize("in_transaction", [True, False], ids=["written-on-completion", "written-by-the-worker"])
def test_completion_notification_is_sent_by_a_real_worker(in_transaction, worker, settings, resource, user, public_app):
    """complete_elicitation() writes notifications/elicitation/complete in the asking session's
    outbox in its own transaction, or (NOTIFY_IN_TRANSACTION off) queues the notify task after
    commit and the worker (not this process) writes it; once either way, even when the task
    runs again."""
    import time

    from elicitation.models import Elicitation
    from elicitation.url_mode import complete_elicitation
    from mcp_oauth.models import McpSessionEvent

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "https://site.example"}
    settings.ELICITATION = {**settings.ELICITATION, "NOTIFY_IN_TRANSACTION": in_transaction}
    asking = url_session(user, public_app, resource)
    other = url_session(user, public_app, resource)
    row = Elicitation.objects.create(
        mode="url",
        kind="external",
        message="Pay",
        target_url="https://pay.example/1",
        user=user,
        session=asking,
        expires_at=timezone.now() + timedelta(minutes=10),
    )
    assert complete_elicitation(row.elicitation_id) is True
    deadline = time.monotonic() + 30
    while not McpSessionEvent.objects.filter(session=asking).exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    events = list(McpSessionEvent.objects.filter(session=asking).values_list("message", flat=True))
    assert events == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": row.elicitation_id},
        }
    ]
    row.refresh_from_db()
    assert row.status == "completed" and row.notified_at is not None
    assert not McpSessionEvent.objects.filter(session=other).exists()
    # a second completion changes nothing and sends nothing
    assert complete_elicitation(row.elicitation_id) is False
    again = worker.tasks["elicitation.tasks.notify_elicitation_complete"].apply_async((row.pk,), ignore_result=False)
    assert again.get(timeout=30) == "already-sent"
    assert McpSessionEvent.objects.filter(session=asking).count() == 1


def test_without_a_reachable_broker_the_notification_is_sent_in_process(settings, resource, user, public_app):
    """A site whose broker is down (or absent) still tells the client: the task (queued when the
    completing transaction does not write the notification itself) runs here instead."""
    from celery import Celery, _state

    from elicitation.models import Elicitation
    from elicitation.url_mode import complete_elicitation
    from mcp_oauth.models import McpSessionEvent

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "https://site.example"}
    settings.ELICITATION = {**settings.ELICITATION, "NOTIFY_IN_TRANSACTION": False}
    app = Celery("no-broker-test", set_as_current=False)
    app.conf.update(
        broker_url="amqp://guest@127.0.0.1:1//",
        task_always_eager=False,
        broker_connection_retry=False,
        broker_connection_max_retries=0,
        broker_connection_timeout=1,
    )
    import elicitation.tasks  # noqa: F401

    app.finalize()
    current = _state.get_current_app()
    app.set_current()
    try:
        session = url_session(user, public_app, resource)
        row = Elicitation.objects.create(
            mode="url",
            kind="external",
            message="Pay",
            target_url="https://pay.example/1",
            user=user,
            session=session,
            expires_at=timezone.now() + timedelta(minutes=10),
        )
        assert complete_elicitation(row.elicitation_id) is True
    finally:
        current.set_current()
    assert list(McpSessionEvent.objects.filter(session=session).values_list("message", flat=True)) == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": row.elicitation_id},
        }
    ]


def test_deploy_check_warns_when_no_celery_app_is_configured():
    from celery import Celery, _state

    from mcp_oauth.checks import check_task_queue

    assert check_task_queue(None) == []  # the reference site's app is current
    current = _state.get_current_app()
    Celery("default", fixups=[], set_as_current=False).set_current()  # what Celery falls back to
    try:
        assert [message.id for message in check_task_queue(None)] == ["mcp_oauth.W050"]
    finally:
        current.set_current()
