"""One fetch of a client's metadata document under its lease, and what is stored from it.

Run by the Celery tasks (:mod:`mcp_oauth.authorization_server.cimd.tasks`) that :mod:`mcp_oauth.authorization_server.cimd.cache` starts:
:func:`perform_fetch` fetches (or revalidates) the document while the lease token it carries still
owns the row of :class:`~mcp_oauth.models.ClientMetadataDocument`, validates it
(:mod:`mcp_oauth.authorization_server.cimd.metadata_document`), mirrors it into the DOT ``Application``
(:func:`sync_application`) and stores the outcome (or the failure, :func:`is_transient` or not,
and its audit event).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from oauth2_provider.cimd import CIMDError
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.cimd.errors import CIMDRefused, FetchFailed, InvalidDocument
from mcp_oauth.authorization_server.cimd.fetcher import FetchResult
from mcp_oauth.authorization_server.cimd.metadata_document import validate_document
from mcp_oauth.models import ClientMetadataDocument
from mcp_oauth.settings import mcp_oauth_settings

log = logging.getLogger("mcp_oauth.cimd")


def now() -> datetime:
    """The current time (aware); one place to read the clock."""
    return timezone.now()


def audit(exc: CIMDRefused, client_id: str, ip: str | None) -> None:
    """Write the audit event a refusal calls for (``cimd.fetch_failed`` / ``cimd.ssrf_refused``), if any.

    Never raises: the audit log must not turn a refusal into a 500.
    """
    if not exc.audit_kind:
        return
    try:
        record(
            exc.audit_kind,
            request=SimpleNamespace(META={"REMOTE_ADDR": ip}) if ip else None,
            client_id=client_id,
            detail={"reason": exc.reason, "message": str(exc), **exc.detail},
        )
    except Exception:  # pragma: no cover - depends on the audit backend
        log.exception("could not record the CIMD audit event for %r", client_id)


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
    ClientMetadataDocument.objects.filter(pk=pk, lease_token=token).update(
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
    Model = ClientMetadataDocument
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
