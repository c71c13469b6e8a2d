"""What the server asked users through their MCP clients (MCP 2025-11-25 "Elicitation")."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _


def new_elicitation_id() -> str:
    """An unguessable ``elicitation_id``: 192 random bits, URL-safe (32 characters)."""
    return secrets.token_urlsafe(24)


class Elicitation(models.Model):
    """One ``elicitation/create`` request and its outcome.

    ``content`` holds the accepted, schema-validated answer of a form. Form mode
    MUST NOT be used for sensitive information (MCP 2025-11-25 "Elicitation",
    security considerations): this row never holds secrets, and neither should the
    forms a tool asks.

    Status: ``pending`` (sent, no answer yet), ``accepted`` (valid answer stored),
    ``declined`` / ``cancelled`` (the user's action, or ``cancelled`` when the
    client answered with an error or the tool call was cancelled), ``invalid``
    (accepted with content that does not match the schema; ``error`` names the
    fields, nothing is stored), ``expired`` (no answer in time), ``completed``
    (URL mode, not used yet).
    """

    class Mode(models.TextChoices):
        FORM = "form", _("form")
        URL = "url", _("URL")

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        ACCEPTED = "accepted", _("accepted")
        DECLINED = "declined", _("declined")
        CANCELLED = "cancelled", _("cancelled")
        INVALID = "invalid", _("invalid answer")
        COMPLETED = "completed", _("completed")
        EXPIRED = "expired", _("expired")

    elicitation_id = models.CharField(
        _("elicitation id"), max_length=64, unique=True, default=new_elicitation_id, editable=False
    )
    mode = models.CharField(_("mode"), max_length=8, choices=Mode.choices, default=Mode.FORM)
    message = models.TextField(_("message"))
    requested_schema = models.JSONField(_("requested schema"), default=dict, blank=True)
    status = models.CharField(
        _("status"), max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    session = models.ForeignKey(
        "mcp_oauth.McpSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    request_id = models.CharField(
        _("tools/call request id"), max_length=200, blank=True, help_text=_("JSON of the JSON-RPC id")
    )
    content = models.JSONField(_("accepted content"), null=True, blank=True)
    error = models.CharField(_("error"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True)
    completed_at = models.DateTimeField(_("answered"), null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("elicitation")
        verbose_name_plural = _("elicitations")

    def __str__(self) -> str:
        return f"{self.mode} elicitation {self.elicitation_id[:8]}… ({self.status})"
