"""The Celery tasks on a real worker with a real broker (Redis on 127.0.0.1:6379), not eagerly.

Skipped when no Redis answers there; the embedded default (eager tasks) is covered elsewhere.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.models import McpSession, RedeemedAuthorizationCode

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
    import mcp_oauth.tasks  # noqa: F401 - registers the shared tasks

    from celery import _state

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
    live = McpSession.objects.create(user=user, application=public_app, resource=resource, protocol_version="2025-11-25")
    McpSession.objects.create(user=user, application=public_app, resource=resource, protocol_version="2025-11-25",
                              ended_at=timezone.now())
    RedeemedAuthorizationCode.objects.create(code_checksum="c" * 64, application=public_app,
                                             redeemed_at=timezone.now() - timedelta(days=3))
    result = worker.tasks["mcp_oauth.tasks.cleanup"].apply_async(ignore_result=False)
    assert result.get(timeout=30) == {"sessions": 1, "redeemed_codes": 1}
    assert list(McpSession.objects.all()) == [live]
    assert not RedeemedAuthorizationCode.objects.exists()
