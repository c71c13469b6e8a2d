"""The CIMD cache: from a client_id URL to a usable DOT ``Application``, with one fetch per URL at a time.

MCP 2025-11-25 "Client ID Metadata Documents": the authorization server SHOULD fetch
the document of a URL-shaped client_id, MUST check it (see
:mod:`mcp_oauth.cimd.validation`), SHOULD cache it per its HTTP cache headers.
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
  error: :func:`is_transient`), the last valid document is still served for
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
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings

from ..settings import mcp_oauth_settings
from ..taskqueue import send_or_run
from .errors import CIMDRefused, FetchFailed, InvalidDocument, NotPermitted, Unavailable
from .fetcher import FetchResult
from .validation import validate_client_id_url, validate_document

log = logging.getLogger("mcp_oauth.cimd")


def now() -> datetime:
    """The current time (aware); one place to read the clock."""
    return timezone.now()


def _model():
    from ..models import ClientMetadataDocument

    return ClientMetadataDocument


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


def audit(exc: CIMDRefused, client_id: str, ip: str | None) -> None:
    """Write the audit event a refusal calls for (``cimd.fetch_failed`` / ``cimd.ssrf_refused``), if any.

    Never raises: the audit log must not turn a refusal into a 500.
    """
    if not exc.audit_kind:
        return
    from ..audit import record

    try:
        record(
            exc.audit_kind,
            request=SimpleNamespace(META={"REMOTE_ADDR": ip}) if ip else None,
            client_id=client_id,
            detail={"reason": exc.reason, "message": str(exc), **exc.detail},
        )
    except Exception:  # pragma: no cover - depends on the audit backend
        log.exception("could not record the CIMD audit event for %r", client_id)


def _check_permission(request: Any, client_id: str) -> None:
    """DOT's ``CIMD_REGISTRATION_PERMISSION_CLASSES`` (the trust policy), all of which must agree; empty denies."""
    classes = oauth2_settings.CIMD_REGISTRATION_PERMISSION_CLASSES
    if not classes or not all(cls().has_permission(request, client_id) for cls in classes):
        raise NotPermitted("This server does not accept this client.")


# --- the DOT Application mirrored from a document --------------------------------------


def sync_application(client_id: str, document: dict[str, Any], expires_at: datetime | None):
    """Create or update the public DOT ``Application`` of a CIMD client from its validated document.

    ``name`` ← ``client_name``, ``redirect_uris`` ← ``redirect_uris``, public client (confidential
    when the document says ``token_endpoint_auth_method: private_key_jwt``),
    authorization-code grant, ``registration_source = "cimd"``, ``cimd_expires_at`` ←
    ``expires_at``. DOT's own model validation (``full_clean``) runs too.

    :returns: the saved Application.
    :raises InvalidDocument: DOT refuses the metadata, or a non-CIMD application
        already owns this client_id (a fetched document never takes one over).
    """
    Application = get_application_model()
    for _attempt in range(2):
        try:
            with transaction.atomic():
                application = Application.objects.select_for_update().filter(client_id=client_id).first()
                if application is None:
                    application = Application(client_id=client_id)
                elif application.registration_source != Application.RegistrationSource.CIMD:
                    raise InvalidDocument(
                        "This client_id is already registered on this server in another way.", reason="collision"
                    )
                application.user = None
                # private_key_jwt (RFC 7523 §2.2): a confidential client, authenticated by its keys.
                application.client_type = (
                    Application.CLIENT_CONFIDENTIAL
                    if document.get("token_endpoint_auth_method") == "private_key_jwt"
                    else Application.CLIENT_PUBLIC
                )
                application.authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
                application.registration_source = Application.RegistrationSource.CIMD
                application.name = document["client_name"]
                application.redirect_uris = " ".join(document["redirect_uris"])
                application.cimd_expires_at = expires_at
                try:
                    application.full_clean(exclude=["client_secret"], validate_unique=False)
                except ValidationError as exc:
                    raise InvalidDocument(
                        "The metadata document is not acceptable to this server: " + "; ".join(exc.messages)[:300],
                        reason="application",
                    ) from None
                application.save()
                return application
        except IntegrityError:
            # Another process created the row between our read and our insert: update it instead.
            continue
    raise FetchFailed("The client could not be registered; try again.", reason="conflict")


def _application_for(entry) -> Any:
    """The Application linked to a valid entry, re-created from the stored document if it was deleted."""
    Application = get_application_model()
    application = None
    if entry.application_id is not None:
        application = Application.objects.filter(pk=entry.application_id).first()
    if application is None or application.client_id != entry.client_id:
        application = sync_application(entry.client_id, entry.document, entry.expires_at)
        _model().objects.filter(pk=entry.pk).update(application=application)
        entry.application_id = application.pk
    elif application.registration_source != Application.RegistrationSource.CIMD:
        raise InvalidDocument("This client_id is already registered on this server in another way.", reason="collision")
    return application


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
        _model()
        .objects.filter(pk=entry.pk, fetch_count=entry.fetch_count)
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
    Model = _model()
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
    from . import tasks

    token = claim_fetch(entry)
    if token is None:
        return False
    _enqueue(tasks.refresh_client_metadata if refresh else tasks.fetch_client_metadata, entry.client_id, token, ip)
    return True


# --- the fetch itself (run by the Celery tasks) -------------------------------------------


#: Fetch failures that say nothing about the document (``FetchFailed.reason``): the host or the
#: network failed, not the client. HTTP 5xx, 408 and 429 are transient too (:func:`is_transient`).
TRANSIENT_REASONS = frozenset({"timeout", "connect", "dns_timeout", "http", "conflict", "internal"})
TRANSIENT_HTTP_STATUSES = frozenset({408, 429})


def is_transient(exc: CIMDRefused) -> bool:
    """Whether a fetch failure is transient: a time-out, a connection, DNS or protocol failure, HTTP 5xx/408/429.

    Only a transient failure lets the last valid document be served past its lifetime
    (stale-if-error) and answers ``temporarily_unavailable`` to a client without one. A
    withdrawn document (404, 410), a redirect, a wrong media type, a too-large or invalid
    document, or a refused address is not transient.
    """
    if not isinstance(exc, FetchFailed):
        return False
    if exc.reason in TRANSIENT_REASONS:
        return True
    status = exc.detail.get("status") if exc.reason == "http_status" else None
    return isinstance(status, int) and (status >= 500 or status in TRANSIENT_HTTP_STATUSES)


def _record_failure(pk: int, token: str, exc: CIMDRefused) -> None:
    moment = now()
    backoff = timedelta(seconds=float(oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS))
    _model().objects.filter(pk=pk, lease_token=token).update(
        last_error=str(exc)[:500],
        last_error_transient=is_transient(exc),
        last_error_at=moment,
        retry_after=moment + backoff,
        fetch_count=F("fetch_count") + 1,
        lease_token="",
        lease_expires_at=None,
    )


def perform_fetch(client_id: str, lease_token: str, ip: str | None = None) -> str:
    """Fetch (or revalidate) the document of ``client_id`` while ``lease_token`` owns its row, and store the outcome.

    A revalidation is a conditional GET with the stored ``ETag`` / ``Last-Modified``;
    304 keeps the document and renews its freshness. A valid document is stored with
    its validators and expiry, and mirrored into the DOT Application. Any failure
    stores its reason and the back-off, keeps the last valid document (never the
    invalid one), and writes a ``cimd.fetch_failed`` or ``cimd.ssrf_refused`` audit
    event. The lease is released in every case.

    :param ip: the client IP of the request that caused the fetch (for the audit log).
    :returns: ``"fetched"``, ``"not_modified"``, ``"failed"`` or ``"skipped"`` (the lease is not ours).
    """
    Model = _model()
    lease = timedelta(seconds=float(mcp_oauth_settings.CIMD_FETCH_LEASE_SECONDS))
    # Renew the lease for the fetch itself (time spent in the queue does not count).
    if not Model.objects.filter(client_id=client_id, lease_token=lease_token).update(lease_expires_at=now() + lease):
        return "skipped"
    entry = Model.objects.get(client_id=client_id)
    try:
        try:
            fetcher = oauth2_settings.CIMD_METADATA_FETCHER()
            conditional = entry.document is not None
            if hasattr(fetcher, "fetch_document"):
                result: FetchResult = fetcher.fetch_document(
                    client_id,
                    etag=entry.etag if conditional else "",
                    last_modified=entry.last_modified if conditional else "",
                )
            else:  # a DOT-style fetcher: fetch(client_id) -> (document, max_age)
                document, max_age = fetcher.fetch(client_id)
                result = FetchResult(200, document, int(max_age))
            if result.status == 304:
                document = validate_document(entry.document, client_id)
                etag, last_modified = result.etag or entry.etag, result.last_modified or entry.last_modified
            else:
                document = validate_document(result.document, client_id)
                etag, last_modified = result.etag, result.last_modified
            fetched_at = now()
            expires_at = fetched_at + timedelta(seconds=max(0, int(result.max_age)))
            application = sync_application(client_id, document, expires_at)
        except CIMDRefused:
            raise
        except CIMDError as exc:  # a DOT-style fetcher's error: its text is for the log only
            log.info("CIMD: the fetcher refused %r: %s", client_id, exc)
            raise FetchFailed("The metadata document could not be fetched.", reason="fetcher") from None
        except Exception:
            log.exception("CIMD: unexpected error fetching %r", client_id)
            raise FetchFailed("The metadata document could not be processed.", reason="internal") from None
    except CIMDRefused as exc:
        log.info("CIMD: fetching %r failed: %s (%s)", client_id, exc, exc.reason)
        _record_failure(entry.pk, lease_token, exc)
        audit(exc, client_id, ip)
        return "failed"
    Model.objects.filter(pk=entry.pk, lease_token=lease_token).update(
        document=document,
        etag=etag,
        last_modified=last_modified,
        fetched_at=fetched_at,
        expires_at=expires_at,
        last_error="",
        last_error_transient=False,
        last_error_at=None,
        retry_after=None,
        fetch_count=F("fetch_count") + 1,
        application=application,
        lease_token="",
        lease_expires_at=None,
    )
    return "not_modified" if result.status == 304 else "fetched"


# --- the entry point ----------------------------------------------------------------------


def resolve_application(client_id: str, request: Any = None) -> tuple[Any, dict[str, Any]]:
    """The usable CIMD client for ``client_id``, fetching its document if needed.

    Runs on the authorization and token endpoints (through
    :class:`~mcp_oauth.cimd.validator.CIMDValidatorMixin`); see the module docstring
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
        transiently (:func:`is_transient`) with no document that may still be served
        (``temporarily_unavailable``, 503, ``retry_after`` seconds).
    """
    ip = requester_ip(request)
    try:
        validate_client_id_url(client_id)
    except CIMDRefused as exc:
        audit(exc, client_id, ip)
        raise
    _check_permission(request, client_id)

    Model = _model()
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
        return _application_for(entry), entry.document

    finished = True
    if not entry.in_backoff(moment):
        deadline = time.monotonic() + float(mcp_oauth_settings.CIMD_FETCH_WAIT_SECONDS)
        start_fetch(entry, ip, refresh=entry.document is not None)
        finished = wait_for_fetch(entry, deadline)
        entry.refresh_from_db()
        moment = now()
        if entry.is_fresh(moment):
            return _application_for(entry), entry.document

    if entry.can_serve_stale(moment, stale_grace):
        log.info("CIMD: serving the stale document of %r (last error: %s)", client_id, entry.last_error)
        return _application_for(entry), entry.document
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
