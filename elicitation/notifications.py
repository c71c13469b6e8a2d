"""``notifications/elicitation/complete`` (SEP-1036 "Completion notification"): the outbox write
shared by the completing request (:func:`elicitation.service.finish_elicitation`, in its own
transaction) and the Celery task that sends what that write left (:mod:`elicitation.tasks`).

Only the session that asked is told, once: the writer holds the elicitation row locked and
sets ``notified_at`` with the outbox row, so a second writer finds it set.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction
from django.utils import timezone

from elicitation.models import Elicitation
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.models import McpSession

__all__ = ["put_in_outbox", "write_completion_notification", "write_in_transaction"]

logger = logging.getLogger("elicitation.url")


def write_completion_notification(row: Elicitation) -> str:
    """Put ``notifications/elicitation/complete`` ``{elicitationId}`` in the outbox of the session
    that asked, and mark the row notified, in the caller's transaction: both commit together or not
    at all. SEP-1036 "Completion notification": only the asking session is told, once.

    The caller holds ``row`` locked (``select_for_update`` inside ``transaction.atomic``), so two
    writers (the completing request, the Celery task, the reconciler) never both write: the
    second one finds ``notified_at`` set. The new outbox row wakes the session's streams when
    the transaction commits (:mod:`mcp_oauth.mcp_server.transport.wakeup`).

    :returns: ``"sent"``, ``"already-sent"`` or ``"no-session"`` (a 2026-07-28 row, bound to no
        session: its client's retry reads the row; or the session ended: nobody is left to tell).
    :raises DatabaseError: the outbox row or the mark could not be written.
    """
    outcome = put_in_outbox(row)
    if outcome == "sent":
        row.save(update_fields=["notified_at"])
    return outcome


def put_in_outbox(row: Elicitation, session: McpSession | None = None) -> str:
    """The outbox half of :func:`write_completion_notification`: sets ``row.notified_at`` (unsaved)
    when the outbox row was written. ``session``: the row's session as the caller loaded it (its
    liveness is checked on it, no query); None: looked up by id."""
    if row.notified_at is not None:
        return "already-sent"
    if row.session_id is None:
        return "no-session"
    try:
        enqueue_session_message(
            session if session is not None else row.session_id,
            {"method": "notifications/elicitation/complete", "params": {"elicitationId": row.elicitation_id}},
        )
    except McpSession.DoesNotExist:
        return "no-session"
    row.notified_at = timezone.now()
    return "sent"


def write_in_transaction(row: Elicitation) -> str:
    """:func:`put_in_outbox` in a savepoint of the completing transaction (``row`` was loaded
    with its session): a database error there must not undo the completion. :returns: its
    answer, or ``"failed"`` (nothing written; the Celery task sends it after the commit)."""
    try:
        with transaction.atomic():
            return put_in_outbox(row, row.session)
    except DatabaseError as exc:
        logger.warning("completion notification of elicitation %s left to the task: %s", row.pk, exc)
        return "failed"
