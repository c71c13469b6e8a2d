"""The CIMD cache: from a client_id URL to a usable DOT ``Application``, with one fetch per URL at a time.

MCP 2025-11-25 "Client ID Metadata Documents": the authorization server SHOULD fetch
the document of a URL-shaped client_id, MUST check it (see
:mod:`mcp_oauth.authorization_server.cimd.metadata_document`), SHOULD cache it per its HTTP cache headers.
This module replaces DOT's ``resolve_cimd_application`` / ``refresh_if_stale``
(DOT's fetcher interface and settings are kept: ``CIMD_METADATA_FETCHER``,
``CIMD_FETCH_TIMEOUT_SECONDS``, ``CIMD_MAX_DOCUMENT_SIZE``,
``CIMD_METADATA_MIN/MAX_AGE_SECONDS``, ``CIMD_FAILURE_BACKOFF_SECONDS``,
``CIMD_REGISTRATION_PERMISSION_CLASSES``).

**Cache states** of a :class:`~mcp_oauth.models.ClientMetadataDocument` at a request:

* fresh → served; in the last ``CIMD_REFRESH_AHEAD_FRACTION`` of its lifetime a
  background revalidation (conditional request) is started, the request does not wait;
* expired (or never fetched) → a fetch is started and the request waits for it, at
  most ``CIMD_FETCH_WAIT_SECONDS``; if it fails *transiently* (5xx, time-out, connection
  error: :func:`~mcp_oauth.authorization_server.cimd.leased_fetch.is_transient`), the last valid document is still served for
  ``CIMD_STALE_IF_ERROR_SECONDS`` after its expiry (RFC 5861 §4), and without one the
  answer is ``temporarily_unavailable`` (503, ``Retry-After``); a withdrawn (404/410) or
  invalid document is refused (``invalid_client``) as soon as the stored one expired;
* failed recently (before ``retry_after``, the ``CIMD_FAILURE_BACKOFF_SECONDS``
  back-off) → no fetch; the stored reason is the answer (or the stale document).

**Single-flight.** The right to fetch a URL is a lease on its database row: a
conditional ``UPDATE … SET lease_token = <random> WHERE pk = … AND fetch_count =
<seen> AND (lease_token = '' OR lease_expires_at <= now)``. The database serialises
concurrent updates of one row, so among any number of requests in any number of
processes exactly one wins and enqueues the Celery fetch task with its token; the
others poll the row until the lease is released, then read the outcome. Because
the condition includes the ``fetch_count`` the request saw, a request that arrives
just after a fetch completed cannot start another one. The task only acts while
its token still owns the row, so a stale duplicate task does nothing. With Celery's
``task_always_eager`` the winner runs the task inline and the others still wait on
the row, so the embedded default (SQLite, no broker) behaves the same.
"""

from __future__ import annotations

import logging
import secrets
import time
from datetime import timedelta
from typing import Any

from django.db.models import Q
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.authorization_server.cimd import tasks
from mcp_oauth.authorization_server.cimd.errors import CIMDRefused, InvalidDocument, NotPermitted, Unavailable
from mcp_oauth.authorization_server.cimd.leased_fetch import audit, now, sync_application
from mcp_oauth.authorization_server.cimd.metadata_document import validate_client_id_url
from mcp_oauth.models import ClientMetadataDocument
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.taskqueue import send_or_run

log = logging.getLogger("mcp_oauth.cimd")


def requester_ip(request: Any) -> str | None:
    """The client IP of an oauthlib request (DOT copies Django's ``META`` into its headers) or a Django request."""
    if request is None:
        return None
    meta = getattr(request, "META", None)
    if meta is None:
        meta = getattr(request, "headers", None) or {}
    try:
        return meta.get("REMOTE_ADDR") or None
    except AttributeError:
        return None


def _check_permission(request: Any, client_id: str) -> None:
    """DOT's ``CIMD_REGISTRATION_PERMISSION_CLASSES`` (the trust policy), all of which must agree; empty denies."""
    classes = oauth2_settings.CIMD_REGISTRATION_PERMISSION_CLASSES
    if not classes or not all(cls().has_permission(request, client_id) for cls in classes):
        raise NotPermitted("This server does not accept this client.")


# --- the DOT Application mirrored from a document --------------------------------------


def _application_for(entry) -> Any:
    """The Application linked to a valid entry, re-created from the stored document if it was deleted."""
    Application = get_application_model()
    application = None
    if entry.application_id is not None:
        application = Application.objects.filter(pk=entry.application_id).first()
    if application is None or application.client_id != entry.client_id:
        application = sync_application(entry.client_id, entry.document, entry.expires_at)
        ClientMetadataDocument.objects.filter(pk=entry.pk).update(application=application)
        entry.application_id = application.pk
    elif application.registration_source != Application.RegistrationSource.CIMD:
        raise InvalidDocument("This client_id is already registered on this server in another way.", reason="collision")
    return application


def _served(entry) -> tuple[Any, dict[str, Any]]:
    """The Application and the document of an entry found fresh or servable stale (so it has a document)."""
    document = entry.document
    if document is None:  # not reached: is_fresh / can_serve_stale require a stored document
        raise CIMDRefused("The client's metadata document could not be used.")
    return _application_for(entry), document


# --- single-flight ------------------------------------------------------------------------


def claim_fetch(entry) -> str | None:
    """Try to take the lease of ``entry`` for one fetch.

    Succeeds only if nobody holds a live lease and no fetch completed since
    ``entry`` was read (its ``fetch_count`` is unchanged).

    :returns: the lease token to hand to the fetch task, or ``None``.
    """
    token = secrets.token_hex(16)
    moment = now()
    lease = timedelta(seconds=float(mcp_oauth_settings.CIMD_FETCH_LEASE_SECONDS))
    claimed = (
        ClientMetadataDocument.objects.filter(pk=entry.pk, fetch_count=entry.fetch_count)
        .filter(Q(lease_token="") | Q(lease_expires_at__lte=moment))
        .update(lease_token=token, lease_expires_at=moment + lease)
    )
    return token if claimed else None


def wait_for_fetch(entry, deadline: float) -> bool:
    """Poll ``entry``'s row until no live lease is held on it, or until ``deadline`` (``time.monotonic()``).

    The first poll comes after ``CIMD_WAIT_POLL_SECONDS``; the interval then grows by
    half each time, up to ten times that, so that many waiters cost the database little.

    :returns: True when the fetch in flight (if any) has finished, False on time-out.
    """
    first = max(0.005, float(mcp_oauth_settings.CIMD_WAIT_POLL_SECONDS))
    poll = first
    Model = ClientMetadataDocument
    while True:
        row = Model.objects.filter(pk=entry.pk).values("lease_token", "lease_expires_at").first()
        if row is None or not row["lease_token"] or (row["lease_expires_at"] and row["lease_expires_at"] <= now()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(poll, max(0.0, deadline - time.monotonic())))
        poll = min(poll * 1.5, first * 10)


def _enqueue(task, client_id: str, token: str, ip: str | None) -> None:
    """Send the fetch task; if the broker cannot be reached, run it here (the lease is ours either way)."""
    send_or_run(task, client_id, token, ip)


def start_fetch(entry, ip: str | None, *, refresh: bool = False) -> bool:
    """Claim ``entry`` and enqueue its fetch (first sight) or refresh task.

    :returns: whether this call started a fetch (False: another one is in flight or just finished).
    """
    token = claim_fetch(entry)
    if token is None:
        return False
    _enqueue(tasks.refresh_client_metadata if refresh else tasks.fetch_client_metadata, entry.client_id, token, ip)
    return True


# --- the entry point ----------------------------------------------------------------------


def resolve_application(client_id: str, request: Any = None) -> tuple[Any, dict[str, Any]]:
    """The usable CIMD client for ``client_id``, fetching its document if needed.

    Runs on the authorization and token endpoints (through
    :class:`~mcp_oauth.authorization_server.cimd.oauth2_validator.CIMDValidatorMixin`); see the module docstring
    for the cache states and the single-flight protocol.

    :param client_id: the client_id parameter as received.
    :param request: the oauthlib request (for the permission classes and the client IP).
    :returns: ``(application, document)``: the DOT Application and the validated
        document it comes from (the authorization request's redirect URI is checked
        against this document).
    :raises InvalidClientIdURL: the URL breaks draft §3 (``invalid_request``).
    :raises AddressRefused: an IP-literal host that is not public (``invalid_client``; audited).
    :raises NotPermitted: the permission classes refused the client_id (``invalid_client``).
    :raises CIMDRefused: the document is withdrawn (404/410), invalid or refused, now or
        within the back-off (``invalid_client``; the fetch failure is audited once); an expired
        document is then refused too (no stale-if-error for these).
    :raises Unavailable: the fetch did not finish within ``CIMD_FETCH_WAIT_SECONDS``, or failed
        transiently (:func:`~mcp_oauth.authorization_server.cimd.leased_fetch.is_transient`) with no document that may still be served
        (``temporarily_unavailable``, 503, ``retry_after`` seconds).
    """
    ip = requester_ip(request)
    try:
        validate_client_id_url(client_id)
    except CIMDRefused as exc:
        audit(exc, client_id, ip)
        raise
    _check_permission(request, client_id)

    Model = ClientMetadataDocument
    entry, _created = Model.objects.get_or_create(client_id=client_id)
    stale_grace = float(mcp_oauth_settings.CIMD_STALE_IF_ERROR_SECONDS)
    moment = now()

    if entry.is_fresh(moment):
        if entry.refresh_due(moment, float(mcp_oauth_settings.CIMD_REFRESH_AHEAD_FRACTION)):
            try:
                start_fetch(entry, ip, refresh=True)
            except Exception:  # a background refresh must never fail the request
                log.exception("CIMD: could not start the background refresh of %r", client_id)
            entry.refresh_from_db()
            if not entry.is_fresh(now()) and not entry.can_serve_stale(now(), stale_grace):
                raise CIMDRefused(entry.last_error or "The client's metadata document is no longer valid.")
        return _served(entry)

    finished = True
    if not entry.in_backoff(moment):
        deadline = time.monotonic() + float(mcp_oauth_settings.CIMD_FETCH_WAIT_SECONDS)
        start_fetch(entry, ip, refresh=entry.document is not None)
        finished = wait_for_fetch(entry, deadline)
        entry.refresh_from_db()
        moment = now()
        if entry.is_fresh(moment):
            return _served(entry)

    if entry.can_serve_stale(moment, stale_grace):
        log.info("CIMD: serving the stale document of %r (last error: %s)", client_id, entry.last_error)
        return _served(entry)
    if not finished:
        raise unavailable("The client's metadata document is still being fetched; try again in a moment.", entry)
    if entry.last_error_transient:
        raise unavailable(
            (entry.last_error or "The client's metadata document could not be fetched.") + " Try again later.", entry
        )
    raise CIMDRefused(entry.last_error or "The client's metadata document could not be used.")


def unavailable(message: str, entry) -> Unavailable:
    """``temporarily_unavailable`` with ``retry_after`` (seconds): the back-off left, else the fetch wait."""
    refused = Unavailable(message)
    if entry.retry_after is not None:
        seconds = (entry.retry_after - now()).total_seconds()
    else:
        seconds = float(mcp_oauth_settings.CIMD_FETCH_WAIT_SECONDS)
    refused.retry_after = max(1, int(seconds + 0.999))
    return refused
