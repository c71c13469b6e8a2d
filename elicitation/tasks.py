"""Celery tasks of the elicitation app.

* ``elicitation.tasks.notify_elicitation_complete`` — sends ``notifications/elicitation/complete``
  for one finished URL elicitation to the MCP session that asked, through the session's
  outbox (:func:`mcp_oauth.transport.sessions.enqueue_session_message`). Queued by
  :func:`elicitation.url.finish_elicitation` after its transaction commits; retried on
  database errors; idempotent (``notified_at`` is set in the same transaction as the
  outbox row, under a row lock, so a retry or a duplicate delivery never sends twice).
* ``elicitation.tasks.expire_elicitations`` — pending elicitations past ``expires_at`` become
  ``expired`` (schedule it every minute or so).
* ``elicitation.tasks.cleanup`` — deletes finished elicitations older than
  ``ELICITATION["RETENTION_DAYS"]``.

Schedule the last two with Celery beat::

    CELERY_BEAT_SCHEDULE = {
        "elicitation-expire": {"task": "elicitation.tasks.expire_elicitations", "schedule": 60},
        "elicitation-cleanup": {"task": "elicitation.tasks.cleanup", "schedule": 3600},
    }
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.db import DatabaseError, transaction
from django.utils import timezone

log = logging.getLogger(__name__)

#: Statuses after which an elicitation is over.
FINISHED = ("accepted", "declined", "cancelled", "invalid", "completed", "expired")


@shared_task(
    name="elicitation.tasks.notify_elicitation_complete",
    ignore_result=True,
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    retry_backoff_max=60,
    max_retries=8,
)
def notify_elicitation_complete(elicitation_pk: int) -> str:
    """Put ``notifications/elicitation/complete`` ``{elicitationId}`` in the asking session's outbox.

    SEP-1036 "Completion notification": sent only to the client that asked (the row's
    session; never another session of the same user), with the elicitation's id.

    :returns: ``"sent"``, ``"already-sent"``, ``"not-finished"`` (still pending, a form, or unknown)
        or ``"no-session"`` (the session ended: nobody is left to tell).
    """
    from mcp_oauth.models import McpSession
    from mcp_oauth.transport.sessions import enqueue_session_message

    from .models import Elicitation

    with transaction.atomic():
        row = (
            Elicitation.objects.select_for_update()
            .filter(pk=elicitation_pk, mode=Elicitation.Mode.URL)
            .exclude(status=Elicitation.Status.PENDING)
            .first()
        )
        if row is None:
            return "not-finished"
        if row.notified_at is not None:
            return "already-sent"
        if row.session_id is None:
            return "no-session"
        try:
            enqueue_session_message(
                row.session_id,
                {"method": "notifications/elicitation/complete", "params": {"elicitationId": row.elicitation_id}},
            )
        except McpSession.DoesNotExist:
            return "no-session"
        row.notified_at = timezone.now()
        row.save(update_fields=["notified_at"])
    return "sent"


@shared_task(name="elicitation.tasks.expire_elicitations", ignore_result=True)
def expire_elicitations() -> int:
    """Mark pending elicitations whose ``expires_at`` passed as ``expired``. :returns: how many."""
    from .models import Elicitation

    now = timezone.now()
    return Elicitation.objects.filter(status=Elicitation.Status.PENDING, expires_at__lte=now).update(
        status=Elicitation.Status.EXPIRED, completed_at=now, client_answer=None
    )


@shared_task(name="elicitation.tasks.cleanup", ignore_result=True)
def cleanup() -> int:
    """Delete elicitations finished more than ``ELICITATION["RETENTION_DAYS"]`` days ago. :returns: how many."""
    from .models import Elicitation
    from .settings import elicitation_settings

    days = elicitation_settings.RETENTION_DAYS
    if days is None:
        return 0
    cutoff = timezone.now() - timedelta(days=float(days))
    finished = Elicitation.objects.filter(status__in=FINISHED)
    old = finished.filter(completed_at__lt=cutoff) | finished.filter(completed_at__isnull=True, created_at__lt=cutoff)
    deleted, _ = old.delete()
    return deleted
