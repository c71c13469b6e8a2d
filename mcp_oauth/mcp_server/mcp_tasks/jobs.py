"""Where tasks run, and the reconciler that keeps none stuck.

:func:`dispatch` hands a task's pk to the executor of ``MCP_OAUTH["TASKS_EXECUTOR"]``: the
Celery task ``mcp_oauth.mcp_tasks.run`` (a worker process), or a thread of this process (the
embedded default, and the fallback when the broker cannot be reached).

:func:`reconcile` (Celery beat: ``mcp_oauth.mcp_tasks.reconcile``, e.g. every 10 s; also run
for one task whenever a ``tasks/get`` finds it overdue, so a site without beat heals too):

* a running task without a heartbeat for ``TASKS_LEASE_SECONDS`` lost its executor (a worker
  killed mid-task): it runs again from the start while ``attempts <= max_retries`` of its tool's
  :class:`~.policy.TaskPolicy`, else it fails with -32603;
* a queued task nobody claimed for ``TASKS_QUEUE_GRACE_SECONDS`` (a lost message, a process that
  died before its thread started) is queued again;
* a task past its ``ttlMs`` is deleted (its executor, if any, stops at its next check).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from celery import current_app, shared_task
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from mcp_oauth.mcp_server.mcp_tasks import runner
from mcp_oauth.mcp_server.mcp_tasks.store import finished, publish_task
from mcp_oauth.models import McpTask
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.taskqueue import celery_configured

__all__ = ["dispatch", "executor", "reconcile", "reconcile_task"]

logger = logging.getLogger("mcp_oauth.mcp_tasks")

Status = McpTask.Status
LOST_WORKER = "The worker running the task was lost"


def executor() -> str:
    """``"celery"`` or ``"thread"``: ``TASKS_EXECUTOR``, or Celery when a real (non-eager) app is configured."""
    chosen = mcp_oauth_settings.TASKS_EXECUTOR
    if chosen in ("celery", "thread"):
        return str(chosen)
    if celery_configured() and not current_app.conf.task_always_eager:
        return "celery"
    return "thread"


@shared_task(name="mcp_oauth.mcp_tasks.run", ignore_result=True, acks_late=False)
def run(pk: int) -> str:
    """Celery entry point: :func:`mcp_oauth.mcp_server.mcp_tasks.runner.run_task`."""
    return runner.run_task(pk, dispatch)


#: A thread's tries of a task whose database was busy (SQLite: "database is locked").
THREAD_ATTEMPTS = 5


def _run_in_thread(pk: int) -> None:
    for attempt in range(THREAD_ATTEMPTS):
        try:
            runner.run_task(pk, dispatch)
            return
        except OperationalError as exc:  # busy: again (a claimed task is skipped, never run twice)
            logger.warning("task %s: database busy (%s); trying again", pk, exc)
            time.sleep(0.1 * 2**attempt)
        except Exception:  # logged; the reconciler takes the task over
            logger.exception("task %s failed in its thread", pk)
            return
        finally:
            connection.close()


def dispatch(pk: int) -> None:
    """Queue task ``pk`` on the executor (a thread when the broker cannot be reached)."""
    if executor() == "celery":
        try:
            run.delay(pk)
            return
        except Exception as exc:  # noqa: BLE001 - kombu's OperationalError, OSError, …
            logger.warning("could not queue task %s on Celery (%s); running it in a thread", pk, exc)
    threading.Thread(target=_run_in_thread, args=(pk,), name=f"mcp-task-{pk}", daemon=True).start()


def _overdue(now: datetime) -> Q:
    lease_cutoff = now - timedelta(seconds=float(mcp_oauth_settings.TASKS_LEASE_SECONDS))
    queue_cutoff = now - timedelta(seconds=float(mcp_oauth_settings.TASKS_QUEUE_GRACE_SECONDS))
    lost = ~Q(lease="") & (Q(heartbeat_at__lt=lease_cutoff) | Q(heartbeat_at__isnull=True))
    stranded = Q(lease="", queued_at__lt=queue_cutoff)
    return Q(status=Status.WORKING) & (lost | stranded)


def is_overdue(task: McpTask, now: datetime | None = None) -> bool:
    """Whether :func:`reconcile` would act on ``task`` (lost executor, stranded in the queue)."""
    return McpTask.objects.filter(_overdue(now or timezone.now()), pk=task.pk).exists()


def reconcile_task(pk: int, now: datetime | None = None) -> str | None:
    """Heal task ``pk`` if it is overdue: ``"requeued"``, ``"retried"``, ``"failed"`` or None."""
    now = now or timezone.now()
    with transaction.atomic():
        task = McpTask.objects.select_for_update().filter(_overdue(now), pk=pk).first()
        if task is None:
            return None
        if not task.lease:
            action = "requeued"
        elif task.attempts <= task.max_retries:
            action = "retried"
            task.lease = ""
            task.heartbeat_at = None
            task.status_message = "The worker was lost; the task runs again."
        else:
            action = "failed"
            task.status = Status.FAILED
            task.lease = ""
            task.error = {"code": -32603, "message": LOST_WORKER}
            task.status_message = f"{LOST_WORKER} (attempt {task.attempts})."
            task.finished_at = now
        task.queued_at = now
        task.updated_at = now
        task.save()
        if action == "failed":
            transaction.on_commit(lambda: finished(task))
        else:
            publish_task(task)
            transaction.on_commit(lambda: dispatch(task.pk))
    logger.warning("task %s %s by the reconciler", task.task_id, action)
    return action


@shared_task(name="mcp_oauth.mcp_tasks.reconcile", ignore_result=True)
def reconcile() -> dict[str, Any]:
    """One pass over overdue and expired tasks. :returns: counts per action (``expired``: deleted)."""
    now = timezone.now()
    counts = {"requeued": 0, "retried": 0, "failed": 0, "expired": 0}
    for pk in McpTask.objects.filter(_overdue(now)).values_list("pk", flat=True)[:1000]:
        action = reconcile_task(pk, now)
        if action is not None:
            counts[action] += 1
    counts["expired"], _ = McpTask.objects.filter(expires_at__lt=now).delete()
    return counts
