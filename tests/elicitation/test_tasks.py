"""Nothing lost, nothing doubled: the completion-notification reconciler on a real Celery worker
and a ``redis-server`` this test starts on its own free port (no persistence) and kills.

A completion normally writes its notification in its own transaction (no task is queued). The
task, and the reconciler behind it, carry the notifications that transaction did not write:
the write was deferred (``ELICITATION["NOTIFY_IN_TRANSACTION"]`` off) or failed (here: a
database trigger refuses the outbox insert, a real database error).

Scenario (issue: broker data loss): the worker is down while URL elicitations complete whose
notify tasks wait in Redis; Redis dies and comes back empty. More complete afterwards and their
tasks are merely *late*. The reconciler (the beat task) runs before the worker returns; then
the worker drains the late tasks, runs the task again for notifications already written, and
the reconciler runs again on the worker. Every elicitation's notification is in its session's
outbox exactly once.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.models import McpSession, McpSessionEvent
from tests.support.elicitation_helpers import url_session
from tests.support.live import free_port

pytestmark = pytest.mark.django_db(transaction=True)


def start_redis(port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import redis

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port, socket_connect_timeout=0.2).ping()
            return process
        except redis.ConnectionError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("redis-server did not start")


def stop(process: subprocess.Popen) -> None:
    process.kill()
    process.wait(timeout=10)


@pytest.fixture
def redis_port():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    pytest.importorskip("redis")
    return free_port()


@pytest.fixture
def celery_app(redis_port):
    from celery import Celery, _state

    app = Celery("reconciler-test", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    broker = f"redis://127.0.0.1:{redis_port}/0"
    app.conf.update(
        broker_url=broker, result_backend=broker, task_always_eager=False, broker_connection_retry_on_startup=True
    )
    import elicitation.tasks  # noqa: F401 - registers the shared tasks

    app.finalize()
    current, default = _state.get_current_app(), _state.default_app
    app.set_current()
    yield app
    _state.set_default_app(default)
    current.set_current()


def make_rows(user, session, count):
    from elicitation.models import Elicitation

    return [
        Elicitation.objects.create(
            mode="url",
            kind="external",
            message=f"Pay {n}",
            target_url=f"https://pay.example/{n}",
            user=user,
            session=session,
            expires_at=timezone.now() + timedelta(minutes=10),
        )
        for n in range(count)
    ]


def refuse_outbox_inserts(refuse: bool) -> None:
    """Install (or drop) a trigger that makes every outbox insert fail with a database error."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            if refuse:
                cursor.execute(
                    "CREATE OR REPLACE FUNCTION test_refuse_outbox() RETURNS trigger LANGUAGE plpgsql AS "
                    "$$ BEGIN RAISE EXCEPTION 'outbox refused'; END $$"
                )
                cursor.execute(
                    "CREATE TRIGGER test_refuse_outbox BEFORE INSERT ON mcp_oauth_mcpsessionevent "
                    "FOR EACH ROW EXECUTE FUNCTION test_refuse_outbox()"
                )
            else:
                cursor.execute("DROP TRIGGER IF EXISTS test_refuse_outbox ON mcp_oauth_mcpsessionevent")
                cursor.execute("DROP FUNCTION IF EXISTS test_refuse_outbox()")
        elif refuse:
            cursor.execute(
                "CREATE TRIGGER test_refuse_outbox BEFORE INSERT ON mcp_oauth_mcpsessionevent "
                "BEGIN SELECT RAISE(ABORT, 'outbox refused'); END"
            )
        else:
            cursor.execute("DROP TRIGGER IF EXISTS test_refuse_outbox")


def outbox_ids(session) -> list[str]:
    return [
        message["params"]["elicitationId"]
        for message in McpSessionEvent.objects.filter(session=session).values_list("message", flat=True)
    ]


@pytest.mark.parametrize("direct", ["deferred", "failing"])
def test_lost_and_late_notifications_are_each_sent_exactly_once(
    direct, settings, celery_app, redis_port, resource, user, public_app
):
    """``deferred``: no completion writes its notification, every one goes through the broker.
    ``failing``: the outbox insert of the completing transaction fails, so the task is queued."""
    import redis
    from celery.contrib.testing.worker import start_worker

    from elicitation.models import Elicitation
    from elicitation.tasks import reconcile_completion_notifications
    from elicitation.url_mode import complete_elicitation

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "https://site.example"}
    settings.ELICITATION = {**settings.ELICITATION, "NOTIFY_IN_TRANSACTION": direct != "deferred"}
    session = url_session(user, public_app, resource)
    lost, late, written = make_rows(user, session, 50), make_rows(user, session, 10), []
    broker = start_redis(redis_port)
    try:
        refuse_outbox_inserts(direct == "failing")
        try:
            for row in lost:
                assert complete_elicitation(row.elicitation_id) is True
            assert redis.Redis(port=redis_port).llen("celery") == 50  # queued, no worker
            stop(broker)  # Redis dies without persistence ...
            broker = start_redis(redis_port)  # ... and comes back empty
            assert redis.Redis(port=redis_port).llen("celery") == 0
            for row in late:
                assert complete_elicitation(row.elicitation_id) is True
            assert redis.Redis(port=redis_port).llen("celery") == 10
            assert not McpSessionEvent.objects.exists()
        finally:
            refuse_outbox_inserts(False)
        if direct == "failing":  # the outbox takes rows again: written by the completion, nothing queued
            written = make_rows(user, session, 5)
            for row in written:
                assert complete_elicitation(row.elicitation_id) is True
            assert redis.Redis(port=redis_port).llen("celery") == 10
            assert sorted(outbox_ids(session)) == sorted(row.elicitation_id for row in written)

        # too recent: the reconciler leaves them to their own tasks
        assert reconcile_completion_notifications() == 0
        Elicitation.objects.update(completed_at=timezone.now() - timedelta(seconds=30))
        assert reconcile_completion_notifications() == 60  # beat, before the worker is back

        with start_worker(celery_app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            deadline = time.monotonic() + 30
            while redis.Redis(port=redis_port).llen("celery") and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(0.5)  # the last late task finishes
            notify = celery_app.tasks["elicitation.tasks.notify_elicitation_complete"]
            for row in [*written, *late[:2]]:  # a duplicate delivery of the task changes nothing
                assert notify.apply_async((row.pk,), ignore_result=False).get(timeout=30) == "already-sent"
            again = celery_app.tasks["elicitation.tasks.reconcile_completion_notifications"].apply_async(
                ignore_result=False
            )
            assert again.get(timeout=30) == 0
    finally:
        stop(broker)

    ids = outbox_ids(session)
    assert sorted(ids) == sorted(row.elicitation_id for row in [*lost, *late, *written])  # 0 lost, 0 duplicated
    assert len(ids) == len(set(ids))
    assert not Elicitation.objects.filter(notified_at__isnull=True).exists()


def test_a_written_notification_is_never_sent_again(settings, resource, user, public_app):
    """The completion wrote the notification: the task and the reconciler (however late) find
    ``notified_at`` set and send nothing; a session that ended before the completion gets none."""
    from elicitation.models import Elicitation
    from elicitation.tasks import notify_elicitation_complete, reconcile_completion_notifications
    from elicitation.url_mode import complete_elicitation

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "https://site.example"}
    session = url_session(user, public_app, resource)
    ended = McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25"
    )
    rows, silent = make_rows(user, session, 3), make_rows(user, ended, 1)[0]
    ended.ended_at = timezone.now()
    ended.save(update_fields=["ended_at"])
    for row in rows:
        assert complete_elicitation(row.elicitation_id) is True
    assert complete_elicitation(silent.elicitation_id) is True
    assert outbox_ids(session) == [row.elicitation_id for row in rows]
    assert [notify_elicitation_complete(row.pk) for row in rows] == ["already-sent"] * 3
    Elicitation.objects.update(completed_at=timezone.now() - timedelta(seconds=30))
    assert reconcile_completion_notifications() == 0
    assert notify_elicitation_complete(silent.pk) == "no-session"
    assert outbox_ids(session) == [row.elicitation_id for row in rows]
    assert not McpSessionEvent.objects.filter(session=ended).exists()


def test_reconciler_skips_what_must_not_be_notified(resource, user, public_app):
    """Tool-owned endings (declined, cancelled, expired), ended sessions and old rows stay silent."""
    from elicitation.models import Elicitation
    from elicitation.tasks import reconcile_completion_notifications

    live = McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25"
    )
    ended = McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25", ended_at=timezone.now()
    )
    old = timezone.now() - timedelta(seconds=30)
    expires = timezone.now() + timedelta(minutes=10)
    common = {
        "mode": "url",
        "kind": "external",
        "message": "m",
        "target_url": "https://x.example/",
        "user": user,
        "expires_at": expires,
    }
    wanted = Elicitation.objects.create(session=live, status="completed", completed_at=old, **common)
    for status in ("declined", "cancelled", "expired", "pending"):
        Elicitation.objects.create(session=live, status=status, completed_at=old, **common)
    Elicitation.objects.create(session=ended, status="completed", completed_at=old, **common)
    Elicitation.objects.create(
        session=live, status="completed", completed_at=timezone.now() - timedelta(days=2), **common
    )
    Elicitation.objects.create(session=live, status="completed", completed_at=old, notified_at=old, **common)
    assert reconcile_completion_notifications() == 1
    assert [m["params"]["elicitationId"] for m in McpSessionEvent.objects.values_list("message", flat=True)] == [
        wanted.elicitation_id
    ]
