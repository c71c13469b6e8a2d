"""Signals of the elicitation app, and its receivers of ``mcp_oauth`` signals.

* :data:`elicitation_finished` — ``sender=Elicitation, elicitation=…`` when a URL elicitation
  finishes (``completed``, ``cancelled`` or ``declined`` on the page or by
  :func:`~elicitation.service.complete_elicitation`), once the change is committed.
* :data:`connection_created` — ``sender=ThirdPartyConnection, connection=…, user=…`` when a
  user connected a third-party account (the tokens are already stored, encrypted).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.dispatch import Signal, receiver
from django.utils import timezone

from elicitation.models import Elicitation
from mcp_oauth.shared.text import storable
from mcp_oauth.signals import client_response_received

elicitation_finished = Signal()
connection_created = Signal()

PREFIX = "elicitation-"


@receiver(client_response_received, dispatch_uid="elicitation.record_client_answer")
def record_client_answer(sender: Any, session: Any, message: dict[str, Any], **kwargs: Any) -> None:
    """Keep the client's answer to one of our ``elicitation/create`` requests that reached a worker
    where nobody waits for it: the asking tool (in another process) reads it from the row
    (:func:`~elicitation.protocol.stored_answer`; the POST publishes the session's answer wake-up).

    The first answer of the session that was asked is recorded whatever the row's status: the
    user may finish the page (``completed``, on any worker) before the client's "accept" arrives,
    or the row may have expired while the tool still waits; the tool decides from both. A row
    that no tool call asked (sent through the outbox by site code) takes an answer only while
    pending. Answers for another session's elicitation, for an unknown id, or a second answer
    are ignored. An outbox-sent elicitation the client declined or cancelled is finished here.
    """
    request_id = message.get("id")
    if not isinstance(request_id, str) or not request_id.startswith(PREFIX) or len(request_id) > 100:
        return
    if not storable(message):
        # PostgreSQL cannot keep NUL characters or lone surrogates: the asker gets an error
        # instead of waiting for an answer that can never be stored.
        message = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": -32602, "message": "the answer holds text that cannot be stored"},
        }
    rows = Elicitation.objects.filter(
        Q(status=Elicitation.Status.PENDING) | ~Q(request_id=""),
        elicitation_id=request_id[len(PREFIX) :],
        session_id=session.pk,
        client_answered_at__isnull=True,
    )
    if not rows.update(client_answer=message, client_answered_at=timezone.now()):
        return  # another session's, an unknown one, or a second answer: ignored
    result = message.get("result")
    action = result.get("action") if isinstance(result, dict) else None
    if action in ("decline", "cancel"):
        rows = Elicitation.objects.filter(
            elicitation_id=request_id[len(PREFIX) :],
            session_id=session.pk,
            status=Elicitation.Status.PENDING,
            mode=Elicitation.Mode.URL,
            request_id="",
        )
        rows.update(
            status=Elicitation.Status.DECLINED if action == "decline" else Elicitation.Status.CANCELLED,
            completed_at=timezone.now(),
        )
