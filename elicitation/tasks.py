"""Celery tasks of the elicitation app.

* ``elicitation.tasks.notify_elicitation_complete`` — sends ``notifications/elicitation/complete``
  for one finished URL elicitation to the MCP session that asked, through the session's
  outbox (:func:`elicitation.notifications.write_completion_notification`). Normally
  :func:`elicitation.service.finish_elicitation` writes it itself, in the completing transaction;
  this task is queued after the commit only when that write was off or failed. Retried on
  database errors; idempotent (``notified_at`` is set in the same transaction as the
  outbox row, under a row lock, so a retry, a duplicate delivery or a notification already
  written by the completing request is never sent twice).
* ``elicitation.tasks.reconcile_completion_notifications`` — the safety net of the two above
  (beat, every few seconds): completed URL elicitations whose notification was never sent
  (the queued task was lost with the broker's data, or is late) are notified now, through the
  same idempotent task body, so each client gets each notification exactly once.
* ``elicitation.tasks.expire_elicitations`` — pending elicitations past ``expires_at`` become
  ``expired`` (schedule it every minute or so).
* ``elicitation.tasks.cleanup`` — deletes finished elicitations older than
  ``ELICITATION["RETENTION_DAYS"]``.

Schedule the last three with Celery beat::

    CELERY_BEAT_SCHEDULE = {
        "elicitation-reconcile": {"task": "elicitation.tasks.reconcile_completion_notifications", "schedule": 10},
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

from elicitation import providers
from elicitation.models import Elicitation, ThirdPartyProvider
from elicitation.notifications import write_completion_notification
from elicitation.settings import elicitation_settings
from mcp_oauth.models import McpSession
from mcp_oauth.shared.batches import delete_in_batches

log = logging.getLogger(__name__)

#: Statuses after which an elicitation is over.
FINISHED = ("accepted", "declined", "cancelled", "invalid", "completed", "failed", "expired")


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
    with transaction.atomic():
        row = (
            Elicitation.objects.select_for_update()
            .filter(pk=elicitation_pk, mode=Elicitation.Mode.URL)
            .exclude(status=Elicitation.Status.PENDING)
            .first()
        )
        if row is None:
            return "not-finished"
        return write_completion_notification(row)


@shared_task(name="elicitation.tasks.reconcile_completion_notifications", ignore_result=True)
def reconcile_completion_notifications(
    older_than_seconds: float = 10, within_seconds: float = 86400, limit: int = 1000
) -> int:
    """Send the completion notifications that were never sent.

    Picks URL elicitations ``completed`` between ``within_seconds`` and ``older_than_seconds``
    ago, with ``notified_at`` empty and a live asking session (at most ``limit`` per run,
    oldest first), and runs :func:`notify_elicitation_complete` for each. That body takes the
    row lock and checks ``notified_at``, so a late original task and this run never both send:
    whichever comes second answers ``"already-sent"``.

    :returns: how many notifications this run sent.
    """
    now = timezone.now()
    pending = list(
        Elicitation.objects.filter(
            mode=Elicitation.Mode.URL,
            status=Elicitation.Status.COMPLETED,
            notified_at__isnull=True,
            completed_at__lte=now - timedelta(seconds=float(older_than_seconds)),
            completed_at__gte=now - timedelta(seconds=float(within_seconds)),
            session__in=McpSession.objects.live(),
        )
        .order_by("completed_at")
        .values_list("pk", flat=True)[: int(limit)]
    )
    sent = 0
    for pk in pending:
        try:
            sent += notify_elicitation_complete(pk) == "sent"
        except DatabaseError as exc:  # one row failing must not stop the others
            log.warning("reconciling the notification of elicitation %s failed: %s", pk, exc)
    if sent:
        log.warning("re-sent %d completion notification(s) that were never delivered", sent)
    return sent


@shared_task(name="elicitation.tasks.expire_elicitations", ignore_result=True)
def expire_elicitations() -> int:
    """Mark pending elicitations whose ``expires_at`` passed as ``expired``. A client answer in
    transit stays on the row: a tool still waiting on another worker reads it. :returns: how many."""
    now = timezone.now()
    return Elicitation.objects.filter(status=Elicitation.Status.PENDING, expires_at__lte=now).update(
        status=Elicitation.Status.EXPIRED, completed_at=now
    )


@shared_task(name="elicitation.tasks.revoke_at_provider", ignore_result=True)
def revoke_at_provider(provider_pk: int, tokens: list[tuple[str, str]]) -> int:
    """Revoke an erased connection's tokens at its provider (RFC 7009), best effort.

    :param tokens: ``[(encrypted token, token_type_hint), ...]``: the message carries ciphertext only.
    :returns: how many revocations the provider accepted (0 when the provider is gone).
    """
    provider = ThirdPartyProvider.objects.filter(pk=provider_pk).first()
    if provider is None:
        return 0
    return providers.revoke_at_provider(provider, [(token, hint) for token, hint in tokens])


@shared_task(name="elicitation.tasks.cleanup", ignore_result=True)
def cleanup() -> int:
    """Delete elicitations finished more than ``ELICITATION["RETENTION_DAYS"]`` days ago, in bounded
    batches (:func:`mcp_oauth.shared.batches.delete_in_batches`). :returns: how many."""
    days = elicitation_settings.RETENTION_DAYS
    if days is None:
        return 0
    cutoff = timezone.now() - timedelta(days=float(days))
    finished = Elicitation.objects.filter(status__in=FINISHED)
    old = finished.filter(completed_at__lt=cutoff) | finished.filter(completed_at__isnull=True, created_at__lt=cutoff)
    return delete_in_batches(old)
