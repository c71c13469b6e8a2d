"""The audit log: security events, never a token or a secret."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AuditEvent(models.Model):
    """One security event (see :mod:`mcp_oauth.audit` for the kinds and how to record one).

    ``client_id`` is kept as text so the event survives the client's deletion;
    ``detail`` is a small JSON object of non-secret facts (hosts, reasons, counts).
    """

    class Kind(models.TextChoices):
        CONSENT_GRANTED = "consent.granted", _("consent granted")
        CONSENT_DENIED = "consent.denied", _("consent denied")
        TOKEN_ISSUED = "token.issued", _("token issued")
        TOKEN_REFRESHED = "token.refreshed", _("token refreshed")
        TOKEN_REVOKED = "token.revoked", _("token revoked")
        REFRESH_TOKEN_REUSE = "token.refresh_reuse", _("refresh token reuse detected")
        SESSION_IDLE_EXPIRED = "session.idle_expired", _("refresh token unused past its idle lifetime")
        SESSION_CAP_REACHED = "session.cap_reached", _("session cap reached")
        CODE_REPLAY = "code.replay", _("authorization code replayed")
        PKCE_CHALLENGE_REUSED = "pkce.challenge_reused", _("PKCE code_challenge reused")
        GRANTS_REVOKED = "grants.revoked", _("user's grants revoked")
        INVALID_RESOURCE = "resource.invalid", _("invalid resource requested")
        CLIENT_REGISTERED = "client.registered", _("client registered dynamically")
        CIMD_FETCH_FAILED = "cimd.fetch_failed", _("client metadata document fetch failed")
        CIMD_SSRF_REFUSED = "cimd.ssrf_refused", _("client metadata document address refused")
        TRUST_DENIED = "trust.denied", _("trust policy denied a client")
        IDENTITY_MISMATCH = "identity.mismatch", _("identity mismatch")
        ELICITATION_FINISHED = "elicitation.finished", _("URL elicitation finished")
        CONNECTION_CREATED = "connection.created", _("third-party account connected")
        CONNECTION_REVOKED = "connection.revoked", _("third-party connection revoked")
        SECRET_STORED = "secret.stored", _("secure input value stored")
        SECRET_DELETED = "secret.deleted", _("secure input value deleted")
        ASSERTION_REFUSED = "assertion.refused", _("JWT assertion refused")
        ASSERTION_REPLAYED = "assertion.replayed", _("JWT assertion replayed")
        ENTERPRISE_IDENTITY_LINKED = "enterprise.identity_linked", _("enterprise identity linked")
        USER_ERASED = "user.erased", _("a user's data erased")
        ORGANIZATION_CLIENT_REQUESTED = "organization.client_requested", _("client approval requested")
        ORGANIZATION_CLIENT_REFUSED = "organization.client_refused", _("client refused for an organization")
        ORGANIZATION_CLIENT_APPROVED = "organization.client_approved", _("organization approved a client")
        ORGANIZATION_CLIENT_DENIED = "organization.client_denied", _("organization denied a client")
        TOKEN_EXCHANGE_REFUSED = "token.exchange_refused", _("token exchange refused")

    kind = models.CharField(_("kind"), max_length=40, choices=Kind.choices, db_index=True)
    created_at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    client_id = models.CharField(_("client ID"), max_length=255, blank=True, db_index=True)
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("The organization the event concerns."),
    )
    ip_address = models.GenericIPAddressField(_("IP address"), null=True, blank=True)
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("audit event")
        verbose_name_plural = _("audit events")
        # An organization's events newest first (its admin's list, mcp_oauth.admin.audit).
        indexes = [models.Index(fields=["organization", "created_at", "id"], name="mcp_oauth_audit_org_time")]
        # The data-lifecycle actions on users (mcp_oauth.admin.user_data): GDPR Art. 15/20 export, Art. 17 erasure.
        permissions = [
            ("export_user_data", _("Can export a user's data")),
            ("erase_user_data", _("Can erase a user's data")),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} at {self.created_at:%Y-%m-%d %H:%M:%S}"
