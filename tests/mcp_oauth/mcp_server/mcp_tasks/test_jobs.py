"""Where tasks run and the reconciler (mcp_oauth.mcp_server.mcp_tasks.jobs): a lost worker retried or failed per policy, a stable idempotency key per task."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.mcp_server.mcp_tasks import jobs
from mcp_oauth.models import McpTask
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import (
    _settings,  # noqa: F401 - fixtures
    _wait,
    queued,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize(("max_retries", "expected"), [(1, "retried"), (0, "failed")])
def test_a_lost_worker_is_retried_or_failed_per_policy(max_retries, expected, resource, user, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TASKS_EXECUTOR": "thread", "TASKS_LEASE_SECONDS": 1}
    stale = timezone.now() - timedelta(seconds=5)
    task = queued(
        user,
        public_app,
        resource,
        {"label": "lost"},
        queued_at=None,
        lease="dead-worker",
        heartbeat_at=stale,
        attempts=1,
        max_retries=max_retries,
        started_at=stale,
    )
    assert jobs.reconcile()[expected] == 1
    if expected == "failed":
        task.refresh_from_db()
        assert task.status == "failed"
        assert task.error == {"code": -32603, "message": "The worker running the task was lost"}
    else:
        assert _wait(lambda: McpTask.objects.get(pk=task.pk).status == "completed")
        task.refresh_from_db()
        assert task.attempts == 2 and task.result["content"][0]["text"] == "done lost"


def test_the_idempotency_key_is_stable_per_task_and_differs_between_tasks():
    from mcp_oauth.mcp_server.mcp_tasks.runner import TaskHandle

    first, retry, other = (
        TaskHandle(1, "task-a", "l1", 1),
        TaskHandle(1, "task-a", "l2", 2),
        TaskHandle(2, "task-b", "l3"),
    )
    assert first.idempotency_key == retry.idempotency_key != other.idempotency_key
    assert len(first.idempotency_key) == 64 and "task-a" not in first.idempotency_key
