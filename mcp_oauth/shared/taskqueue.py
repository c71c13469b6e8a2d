"""Sending Celery tasks so that a missing broker never loses the work.

:func:`send_or_run` enqueues a task. A site without a Celery app of its own (Celery's implicit
default app, which would send to ``amqp://localhost``, whatever listens there) runs the task
here, in this process; so does a site whose broker cannot be reached (with a warning in the
log). Used for work that must happen even in a one-process deployment: CIMD fetches and
URL-elicitation completion notifications.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import current_app
from kombu.exceptions import OperationalError

log = logging.getLogger("mcp_oauth.tasks")

__all__ = ["celery_configured", "send_or_run"]


def _is_broker_error(exc: BaseException) -> bool:
    if isinstance(exc, (OSError, ConnectionError)):  # kombu's OperationalError is an OSError
        return True
    return isinstance(exc, OperationalError)


def send_or_run(task: Any, *args: Any, **kwargs: Any) -> None:
    """``task.delay(*args, **kwargs)``; ``task(*args, **kwargs)`` in this process when no Celery app is
    configured (:func:`celery_configured`) or the broker cannot be reached (the task's own errors
    propagate then)."""
    if not celery_configured():
        task(*args, **kwargs)
        return
    try:
        task.delay(*args, **kwargs)
    except Exception as exc:
        if not _is_broker_error(exc):
            raise
        log.warning("could not enqueue %s (%s); running it in-process", getattr(task, "name", task), exc)
        task(*args, **kwargs)


def celery_configured() -> bool:
    """Whether a Celery app other than Celery's implicit default is current, or tasks run eagerly.

    Celery's implicit default app sends to ``amqp://localhost``, whatever runs there: a site
    that never set up Celery would hand its tasks to a stranger's broker, or to none.
    """
    # celery._state._get_current_app creates the fallback as Celery("default", fixups=[], ...)
    return current_app.main != "default" or bool(current_app.conf.task_always_eager)
