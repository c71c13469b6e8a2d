"""The CIMD cache: one row per client_id URL whose metadata document this server has tried to fetch.

Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document-00 §4;
MCP 2025-11-25 "Client ID Metadata Documents"): the client_id is an https URL and the
authorization server fetches the client's metadata from it. The row is the HTTP
cache entry of that document (RFC 9111) and, through its lease, the cross-process
lock that makes concurrent first sights of one URL cause a single fetch
(see :mod:`mcp_oauth.authorization_server.cimd.cache`).
"""

from __future__ import annotations

from datetime import datetime

from django.db import models
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings


class ClientMetadataDocument(models.Model):
    """The cached, validated metadata document of one CIMD client.

    * ``client_id``: the URL, exactly as the client sent it (it is also the DOT
      ``Application.client_id``).
    * ``document``: the last document that passed validation (a JSON object), or
      ``None`` when no valid document was ever fetched. An invalid document or a
      failed fetch never replaces it and is never served as valid.
    * ``etag`` / ``last_modified``: validators of that document, sent back as
      ``If-None-Match`` / ``If-Modified-Since`` when revalidating (RFC 9110 §13.1).
    * ``fetched_at`` / ``expires_at``: when the document was last fetched or
      revalidated, and when it stops being fresh: ``fetched_at`` + the freshness
      lifetime from ``Cache-Control`` / ``Expires`` (RFC 9111 §4.2.1), clamped to
      ``OAUTH2_PROVIDER["CIMD_METADATA_MIN_AGE_SECONDS"]`` ..
      ``["CIMD_METADATA_MAX_AGE_SECONDS"]``.
    * ``last_error`` / ``last_error_at``: the reason (safe to show) the last attempt
      failed, if it did; ``retry_after``: the end of the failure back-off
      (``CIMD_FAILURE_BACKOFF_SECONDS``), before which no new fetch is made.
    * ``fetch_count``: outbound fetches made for this URL (successes, 304s and
      failures); it also serves as the row's version for single-flight claims.
    * ``application``: the DOT ``Application`` the document is mirrored into.
    * ``lease_token`` / ``lease_expires_at``: who currently owns the fetch of this
      URL (empty: nobody), and until when.
    """

    client_id = models.CharField(_("client ID (metadata document URL)"), max_length=255, unique=True)
    document = models.JSONField(_("validated document"), null=True, blank=True)
    etag = models.CharField(_("ETag"), max_length=255, blank=True)
    last_modified = models.CharField(_("Last-Modified"), max_length=64, blank=True)
    fetched_at = models.DateTimeField(_("fetched at"), null=True, blank=True)
    expires_at = models.DateTimeField(_("fresh until"), null=True, blank=True, db_index=True)
    last_error = models.CharField(_("last error"), max_length=500, blank=True)
    last_error_at = models.DateTimeField(_("last error at"), null=True, blank=True)
    # The last failure was transient (HTTP 5xx/408/429, time-out, connection or DNS failure):
    # only then is a stale document served (stale-if-error) and a client without one told
    # temporarily_unavailable instead of invalid_client.
    last_error_transient = models.BooleanField(_("last error was transient"), default=False)
    retry_after = models.DateTimeField(_("no new fetch before"), null=True, blank=True)
    fetch_count = models.PositiveIntegerField(_("fetches"), default=0)
    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="client_metadata_document",
        verbose_name=_("client"),
    )
    lease_token = models.CharField(max_length=32, blank=True, editable=False)
    lease_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(_("first seen"), auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("client metadata document")
        verbose_name_plural = _("client metadata documents")
        ordering = ["client_id"]

    def __str__(self) -> str:
        return self.client_id

    # --- cache state, all at a given instant ``now`` (an aware datetime) -------------

    def is_fresh(self, now: datetime) -> bool:
        """A valid document whose freshness lifetime has not run out."""
        return self.document is not None and self.expires_at is not None and now < self.expires_at

    def in_backoff(self, now: datetime) -> bool:
        """The last attempt failed and its back-off has not ended: no new fetch yet."""
        return self.retry_after is not None and now < self.retry_after

    def can_serve_stale(self, now: datetime, stale_if_error_seconds: float) -> bool:
        """A valid, expired document may still be used because revalidation failed *transiently*
        (RFC 5861 §4 stale-if-error). A withdrawn (404/410) or invalid document is refused once
        its freshness lifetime ends."""
        if self.document is None or self.expires_at is None or not self.last_error_transient:
            return False
        return (now - self.expires_at).total_seconds() <= stale_if_error_seconds

    def refresh_due(self, now: datetime, ahead_fraction: float) -> bool:
        """Fresh, but in the last ``ahead_fraction`` of its lifetime: time for a background revalidation."""
        if not self.is_fresh(now) or self.fetched_at is None or self.expires_at is None or self.in_backoff(now):
            return False
        lifetime = (self.expires_at - self.fetched_at).total_seconds()
        return (self.expires_at - now).total_seconds() <= lifetime * ahead_fraction
