"""URL-mode elicitations as a domain service (SEP-1036; MCP 2025-11-25 / 2026-07-28 "Elicitation").

The server sends the user, through their MCP client, to a page of its own
(:attr:`Elicitation.url <elicitation.models.Elicitation.url>`, ``https://<site>/elicitation/<id>/``)
where the interaction that must not pass through the client happens: connecting a third-party
account (OAuth), typing an API key, paying. The link carries only an opaque, single-use,
expiring id (MCP "Safe URL Handling"). The page checks that the logged-in user is the one who
was asked, at the start and at the end.

A row is bound to its user always, and to the MCP session that asked when there is one
(2025-11-25: ``notifications/elicitation/complete`` then goes to that session's outbox). A
2026-07-28 request has no session: the row is bound to the user only, and the client's retry
learns the outcome from the row its sealed ``requestState`` names (:func:`wait_for_outcome`).

Synchronous functions (ORM) for any Django code: :func:`create_url_elicitation`,
:func:`finish_elicitation`, :func:`complete_elicitation`, :func:`get_secret`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from elicitation import failures
from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.notifications import write_completion_notification, write_in_transaction
from elicitation.protocol import REQUEST_ID_PREFIX, describe, supports_url
from elicitation.settings import elicitation_settings
from elicitation.signals import elicitation_finished
from elicitation.tasks import notify_elicitation_complete
from mcp_oauth import audit
from mcp_oauth.mcp_server.transport import drain, wakeup
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.models import AuditEvent, McpSession
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.loopback import is_https_or_loopback
from mcp_oauth.shared.taskqueue import send_or_run
from mcp_oauth.shared.text import storable

__all__ = [
    "check_link_scheme",
    "close_answer",
    "complete_elicitation",
    "create_unsent_secret_request",
    "create_url_elicitation",
    "find_connection",
    "finish_elicitation",
    "get_secret",
    "outcome_topic",
    "pending_url_request",
    "set_status",
    "take_unreported_failure",
    "wait_for_outcome",
    "write_completion_notification",
]


def check_link_scheme() -> None:
    """SEP-1036 "URL security requirements": https only (http only for a loopback development site)."""
    if not is_https_or_loopback(mcp_oauth_settings.base_url):
        raise ImproperlyConfigured('URL elicitation needs an https MCP_OAUTH["BASE_URL"] (http only on loopback)')


def create_url_elicitation(
    *,
    user: Any,
    session: McpSession | str | None,
    message: str,
    kind: str,
    provider: ThirdPartyProvider | str | None = None,
    scopes: Iterable[str] = (),
    secret_name: str = "",
    target_url: str = "",
    tool_name: str = "",
    request_id: Any = None,
    ttl_seconds: float | None = None,
    send: bool = False,
    application: Any = None,
    organization: Any = None,
) -> Elicitation:
    """Create a pending URL-mode elicitation for ``user`` (sync; any Django code).

    :param kind: ``"connect"`` (needs ``provider``, optional ``scopes``), ``"secret"`` (needs
        ``secret_name``: the secure input page stores the value under it) or ``"external"``
        (needs an https ``target_url``: after the identity check the page sends the user there,
        and the site calls :func:`complete_elicitation` when the interaction is over).
    :param tool_name: the tool asking (shown on the page; at most 128 characters kept).
    :param session: the :class:`~mcp_oauth.models.McpSession` (or its id) that will be told; it
        must be live and belong to ``user``. None: a 2026-07-28 request (no session; the client's
        retry reads the outcome from the row).
    :param send: also put ``elicitation/create`` (``mode: "url"``) in the session's outbox, so the
        client shows the link without a tool call (the session must declare URL mode).
    :param ttl_seconds: lifetime of the link; default ``ELICITATION["URL_ELICITATION_TTL_SECONDS"]``.
    :param application: the OAuth client (an ``Application`` or its pk) whose token asked; the
        pages name it as the consent page does. Default: the session's client (None without one).
    :param organization: the :class:`~mcp_oauth.models.Organization` (or its pk) the asking request
        acts for (``ctx.organization``); default: the session's. A token acting for another
        organization never finds the row.
    :returns: the saved :class:`~elicitation.models.Elicitation`; give the client :attr:`~Elicitation.url`.
    :raises ValueError: a bad argument (unknown or disabled provider, missing field, dead session,
        another user's session, empty message, a non-https target, ``send`` without a session).
    :raises ImproperlyConfigured: the site is not served over https (or loopback).
    """
    check_link_scheme()
    if not isinstance(message, str) or not message.strip() or not storable(message) or len(message) > 2000:
        raise ValueError("a URL elicitation needs a non-empty message (at most 2000 characters, no NUL)")
    if isinstance(session, str):
        session = McpSession.objects.live().filter(pk=session).first()
        if session is None:
            raise ValueError("no live MCP session with that id")
    elif session is not None and not McpSession.objects.live().filter(pk=session.pk).exists():
        raise ValueError("the MCP session has ended")
    if getattr(user, "pk", None) is None or (session is not None and session.user_id != user.pk):
        raise ValueError("the MCP session belongs to another user")
    if send and session is None:
        raise ValueError("send=True needs a session")
    fields: dict[str, Any] = {}
    if kind == Elicitation.Kind.CONNECT:
        if not isinstance(provider, ThirdPartyProvider):
            provider = ThirdPartyProvider.objects.filter(slug=str(provider or "")).first()
        if provider is None or not provider.enabled:
            raise ValueError("unknown or disabled third-party provider")
        requested = list(dict.fromkeys([*provider.scope_list, *scopes]))
        fields.update(provider=provider, scopes=" ".join(requested))
    elif kind == Elicitation.Kind.SECRET:
        if not secret_name or len(secret_name) > 100 or not storable(secret_name):
            raise ValueError("a secret elicitation needs a secret_name (at most 100 characters)")
        fields["secret_name"] = secret_name
    elif kind == Elicitation.Kind.EXTERNAL:
        if not is_https_or_loopback(target_url):
            raise ValueError("an external elicitation needs an https target_url")
        fields["target_url"] = target_url
    else:
        raise ValueError(f"unknown URL elicitation kind {kind!r}")
    application_id = getattr(application, "pk", application)
    if application_id is None and session is not None:
        application_id = session.application_id
    organization_id = getattr(organization, "pk", organization)
    if organization_id is None and session is not None:
        organization_id = session.organization_id
    ttl = float(elicitation_settings.URL_ELICITATION_TTL_SECONDS if ttl_seconds is None else ttl_seconds)
    if ttl <= 0:
        raise ValueError("ttl_seconds must be positive")
    with transaction.atomic():
        row = Elicitation.objects.create(
            mode=Elicitation.Mode.URL,
            kind=kind,
            message=message,
            user=user,
            session=session,
            application_id=application_id,
            organization_id=organization_id,
            request_id="" if request_id is None else json.dumps(request_id)[:200],
            tool_name=str(tool_name or "")[:128],
            expires_at=timezone.now() + timedelta(seconds=ttl),
            **fields,
        )
        if send:
            assert session is not None
            if not supports_url(session.client_capabilities, session.protocol_version):
                raise ValueError("the MCP session's client did not declare URL-mode elicitation")
            enqueue_session_message(
                session.pk,
                {"id": REQUEST_ID_PREFIX + row.elicitation_id, "method": "elicitation/create", "params": describe(row)},
            )
    return row


def finish_elicitation(
    elicitation_id: str,
    status: str = Elicitation.Status.COMPLETED,
    *,
    user: Any = None,
    request: Any = None,
    error: str = "",
) -> bool:
    """Mark a pending URL elicitation ``status`` (``completed``, ``cancelled``, ``declined`` or
    ``failed``: the provider broke the connection, ``error`` says why) and notify the session that
    asked. Every one of them is terminal: SEP-1036's completion notification tells the client the
    out-of-band interaction is over, whatever its outcome, and its retry learns which.

    The notification (outbox row + ``notified_at``) is written in the same transaction as the
    status (:func:`~elicitation.notifications.write_completion_notification`), and the session's streams are woken when it
    commits: no broker hop. When that write is off (``ELICITATION["NOTIFY_IN_TRANSACTION"]``) or
    fails, the Celery task :func:`~elicitation.tasks.notify_elicitation_complete` is queued after
    the commit, and the beat reconciler sends whatever that task lost; each is sent once.

    :returns: False (and nothing changes) for an unknown, expired, finished or form elicitation,
        or one of another user when ``user`` is given.
    """
    if status not in {
        Elicitation.Status.COMPLETED,
        Elicitation.Status.CANCELLED,
        Elicitation.Status.DECLINED,
        Elicitation.Status.FAILED,
    }:
        raise ValueError(f"a URL elicitation cannot finish as {status!r}")
    if not isinstance(elicitation_id, str) or not elicitation_id or len(elicitation_id) > 64:
        return False
    with transaction.atomic():
        row = (
            Elicitation.objects.select_for_update(of=("self",))
            .select_related("user", "session__application")
            .filter(elicitation_id=elicitation_id, mode=Elicitation.Mode.URL, status=Elicitation.Status.PENDING)
            .first()
        )
        if row is None or row.is_expired:
            return False
        if user is not None and row.user_id != getattr(user, "pk", None):
            return False
        row.status = status
        row.completed_at = timezone.now()
        row.error = error[:500]
        outcome = write_in_transaction(row) if elicitation_settings.NOTIFY_IN_TRANSACTION else "deferred"
        fields = ["status", "completed_at", "error"] + (["notified_at"] if outcome == "sent" else [])
        row.save(update_fields=fields)
        application = row.session.application if row.session and row.session.application_id else None
        audit.record(
            AuditEvent.Kind.ELICITATION_FINISHED,
            request=request,
            user=row.user,
            client_id=application.client_id if application is not None else "",
            detail={"elicitation": row.elicitation_id[:8], "kind": row.kind, "status": status},
            organization=row.organization_id,
        )
        if outcome in {"deferred", "failed"}:  # the task (or, were it lost, the reconciler) sends it
            transaction.on_commit(lambda: _queue_notification(row.pk))
        wakeup.publish_on_commit(outcome_topic(row.pk))  # a tool or a retry waiting on any worker
        transaction.on_commit(lambda: elicitation_finished.send(sender=Elicitation, elicitation=row))
    return True


def _queue_notification(pk: int) -> None:
    send_or_run(notify_elicitation_complete, pk)  # no broker reachable: sent from this process


def complete_elicitation(elicitation_id: str, *, user: Any = None, request: Any = None) -> bool:
    """The external-completion hook: the out-of-band interaction of ``elicitation_id`` is done.

    Call it from the site's own code, e.g. a payment provider's signed webhook view, after
    checking the webhook's signature::

        @csrf_exempt
        def payment_webhook(request):
            event = verify_signature(request)          # your provider's check
            complete_elicitation(event["metadata"]["elicitation_id"])
            return HttpResponse(status=204)

    Marks the elicitation ``completed``; a 2025-11-25 session that asked gets
    ``notifications/elicitation/complete`` (written with the completion; once), a 2026-07-28 client's
    retry finds the row completed. Idempotent.

    :returns: False for an unknown, expired or already finished id (nothing happens), True otherwise.
    """
    return finish_elicitation(elicitation_id, Elicitation.Status.COMPLETED, user=user, request=request)


def get_secret(user: Any, name: str) -> str | None:
    """The decrypted value ``user`` stored under ``name`` on the secure input page, or None.

    :raises DecryptionError: it exists but no configured key opens it.
    """
    row = StoredSecret.objects.filter(user=user, name=name).first()
    return None if row is None else row.value


def find_connection(
    user: Any, provider_slug: str, scopes: list[str], organization_id: Any = None
) -> tuple[ThirdPartyProvider | None, ThirdPartyConnection | None]:
    """The enabled provider ``provider_slug`` (None when unknown or disabled) and ``user``'s
    connection to it covering ``scopes`` (None when there is none). A connection made for one
    organization and used now for another (``organization_id``: the request's, None for none)
    serves more than one from then on: its ``organization`` is cleared."""
    provider = ThirdPartyProvider.objects.filter(slug=provider_slug, enabled=True).first()
    if provider is None:
        return None, None
    connection = ThirdPartyConnection.objects.filter(user=user, provider=provider).select_related("provider").first()
    if connection is not None and not connection.covers(scopes):
        connection = None
    if connection is not None and connection.organization_id not in (None, organization_id):
        ThirdPartyConnection.objects.filter(pk=connection.pk).update(organization=None)
        connection.organization_id = None
    return provider, connection


def pending_url_request(user: Any, session: McpSession | None, **match: Any) -> Elicitation | None:
    """The newest unexpired pending URL elicitation of ``user`` (and ``session``; None: rows
    bound to no session) matching ``match`` (model fields): a client retrying before the user
    finished gets the same link again, not one more row."""
    return (
        Elicitation.objects.filter(
            user=user,
            session=session,
            mode=Elicitation.Mode.URL,
            status=Elicitation.Status.PENDING,
            expires_at__gt=timezone.now(),
            **match,
        )
        .order_by("-created_at")
        .first()
    )


def take_unreported_failure(user: Any, session: McpSession | None, provider: ThirdPartyProvider) -> Elicitation | None:
    """The newest ``connect`` elicitation of ``user`` in ``session`` for ``provider`` that the
    provider refused (``declined`` by ``access_denied``) or broke (``failed``) within the last
    ``ELICITATION["URL_ELICITATION_TTL_SECONDS"]``, and that no tool call was told about yet;
    marked told (``reported_at``) in the same statement, so exactly one retry reports it.

    A 2025-11-25 client learns the end of the interaction from ``notifications/elicitation/complete``
    (SEP-1036) and retries the call, which carries nothing that names the elicitation: this is how
    that retry finds the outcome instead of sending the user to a new link. None: nothing to report.
    """
    if session is None:
        return None
    since = timezone.now() - timedelta(seconds=float(elicitation_settings.URL_ELICITATION_TTL_SECONDS))
    candidates = Elicitation.objects.filter(
        user=user,
        session=session,
        mode=Elicitation.Mode.URL,
        kind=Elicitation.Kind.CONNECT,
        provider=provider,
        status__in=(Elicitation.Status.DECLINED, Elicitation.Status.FAILED),
        error__startswith=failures.PREFIX,
        completed_at__gte=since,
        reported_at__isnull=True,
    ).order_by("-completed_at")
    for row in candidates[:5]:
        if Elicitation.objects.filter(pk=row.pk, reported_at__isnull=True).update(reported_at=timezone.now()):
            return row
    return None


def create_unsent_secret_request(user: Any, name: str, message: str) -> Elicitation:
    """A pending ``secret`` elicitation listed on the user's connections page only (no session,
    never sent to a client: for clients without URL mode)."""
    check_link_scheme()
    existing = pending_url_request(user, None, kind=Elicitation.Kind.SECRET, secret_name=name)
    if existing is not None:
        return existing
    ttl = float(elicitation_settings.URL_ELICITATION_TTL_SECONDS)
    return Elicitation.objects.create(
        mode=Elicitation.Mode.URL,
        kind=Elicitation.Kind.SECRET,
        message=message[:2000],
        secret_name=name,
        user=user,
        session=None,
        expires_at=timezone.now() + timedelta(seconds=ttl),
    )


async def set_status(row: Elicitation, status: str, error: str = "") -> None:
    """Finish a pending row the tool itself owns (declined, cancelled, expired, a form answer):
    no notification."""
    await Elicitation.objects.filter(pk=row.pk, status=Elicitation.Status.PENDING).aupdate(
        status=status, error=error[:500], completed_at=timezone.now()
    )
    row.status = status


async def close_answer(pk: int) -> None:
    """The asking tool read the client's answer to its ``elicitation/create`` (or stopped waiting
    for it): the row takes no later answer (:func:`~elicitation.signals.record_client_answer`)."""
    await Elicitation.objects.filter(pk=pk, client_answered_at__isnull=True).aupdate(client_answered_at=timezone.now())


def outcome_topic(pk: int) -> str:
    """Wake-up topic (:mod:`mcp_oauth.mcp_server.transport.wakeup`) published when the URL elicitation ``pk``
    finishes (:func:`finish_elicitation`, once committed)."""
    return f"elicitation:{pk}"


async def wait_for_outcome(pk: int, seconds: float, *, release_on_drain: bool = False) -> Elicitation | None:
    """The row ``pk`` once it is no longer pending, or as it is after ``seconds``; None when it
    does not exist. Woken by :func:`outcome_topic` from whichever worker finished it; re-read
    every ``MCP_OAUTH["SSE_POLL_INTERVAL_SECONDS"]`` without a shared wake-up channel (every
    ``WAKEUP_SAFETY_POLL_SECONDS`` with one, in case a wake-up was lost).

    ``release_on_drain``: while this worker drains (:mod:`mcp_oauth.mcp_server.transport.drain`, which wakes every
    waiter) the row is returned as it is at once. For a wait the caller can answer without an
    outcome and lose nothing: a held 2026-07-28 retry answers ``input_required`` again, and the
    client's next retry reaches a worker that is not stopping."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, float(seconds))
    interval = wakeup.answer_poll_interval(float(mcp_oauth_settings.SSE_POLL_INTERVAL_SECONDS))
    with wakeup.hub.subscribe(outcome_topic(pk)) as subscription:  # before reading: no wake-up is missed
        while True:
            row = await Elicitation.objects.filter(pk=pk).select_related("provider").afirst()
            if row is None or row.status != Elicitation.Status.PENDING or loop.time() >= deadline:
                return row
            if release_on_drain and drain.is_draining():
                return row
            await subscription.wait(min(interval, max(0.0, deadline - loop.time())))
