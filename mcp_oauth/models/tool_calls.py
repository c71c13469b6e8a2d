"""The tool-call audit trail: one row per MCP request of the audited methods (``tools/call``, ...).

Rows are written off the request path, in batches, by
:mod:`mcp_oauth.observability.audit_trail` (an observer of the MCP endpoint); they are pruned after
``TOOL_CALL_RETENTION_DAYS`` (:func:`mcp_oauth.retention.prune_tool_calls`). :class:`ToolCallUse`
keeps, per client and user, the time of the newest call ("last used"), updated once per batch.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = ["ToolCallDashboard", "ToolCallRecord", "ToolCallUse"]


class ToolCallRecord(models.Model):
    """One audited MCP request: who (user, client), what (method, tool, argument digest), how it ended.

    ``client_id`` and ``resource`` are kept as text so the row survives the client's deletion.
    ``arguments_digest`` is the HMAC-SHA256 (hex, keyed from ``SECRET_KEY``) of the arguments'
    canonical JSON (sorted keys, no spaces, UTF-8), so two identical calls can be matched without
    keeping their values, and a reader of the trail cannot guess small values back;
    ``arguments`` holds the values only when ``TOOL_CALL_AUDIT_ARGUMENTS`` is on, after the adapter's
    :meth:`~mcp_oauth.adapter.DefaultMCPAdapter.redact_tool_arguments`. ``duration_ms`` is the time
    from the request's start to its response, in milliseconds.
    """

    class Outcome(models.TextChoices):
        OK = "ok", _("ok")
        TOOL_ERROR = "tool_error", _("tool error")
        ERROR = "error", _("error")
        DENIED = "denied", _("denied")
        INPUT_REQUIRED = "input_required", _("input required")

    id = models.BigAutoField(primary_key=True)
    created_at = models.DateTimeField(_("when"), db_index=True, help_text=_("When the request started."))
    # No database constraint: rows are inserted by the trail's writer in its own transaction,
    # possibly before the request's own transaction committed the user; deletion is the ORM's
    # (SET_NULL) and the erasure's (mcp_oauth.observability.audit_trail_users).
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    client_id = models.CharField(_("client ID"), max_length=255)
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
        verbose_name=_("organization"),
        help_text=_("The organization the call acted for."),
    )
    resource = models.CharField(_("resource"), max_length=255)
    tool = models.CharField(_("tool"), max_length=200, help_text=_("The tool, prompt or resource URI named."))
    method = models.CharField(_("method"), max_length=40, default="tools/call")
    era = models.CharField(_("era"), max_length=16)
    protocol_version = models.CharField(_("protocol version"), max_length=16)
    outcome = models.CharField(_("outcome"), max_length=16, choices=Outcome.choices)
    error_code = models.IntegerField(_("JSON-RPC error code"), null=True, blank=True)
    duration_ms = models.FloatField(_("duration (ms)"))
    arguments_digest = models.CharField(_("arguments digest"), max_length=64, blank=True)
    arguments = models.JSONField(_("arguments"), null=True, blank=True)
    trace_id = models.CharField(_("trace ID"), max_length=32, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = _("tool call")
        verbose_name_plural = _("tool calls")
        indexes = [
            models.Index(fields=["client_id", "created_at"], name="mcp_toolcall_client_idx"),
            models.Index(fields=["tool", "created_at"], name="mcp_toolcall_tool_idx"),
            # An organization's calls newest first (its admin's list, mcp_oauth.admin.tool_calls).
            models.Index(fields=["organization", "created_at", "id"], name="mcp_toolcall_org_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.tool} by {self.client_id} at {self.created_at:%Y-%m-%d %H:%M:%S}"


class ToolCallUse(models.Model):
    """The newest audited call of ``client_id`` for ``user`` ("last used" on the connected-apps page).

    One row per (client, user), upserted once per batch by the audit trail's writer; calls of machine
    tokens (no user) update only ``ClientProfile.last_used_at``.
    """

    client_id = models.CharField(_("client ID"), max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+", db_constraint=False)
    last_used_at = models.DateTimeField(_("last used"))

    class Meta:
        verbose_name = _("client use")
        verbose_name_plural = _("client uses")
        constraints = [models.UniqueConstraint(fields=["user", "client_id"], name="mcp_toolcall_use_uniq")]

    def __str__(self) -> str:
        return f"{self.client_id} last used {self.last_used_at:%Y-%m-%d %H:%M:%S}"


class ToolCallDashboard(ToolCallRecord):
    """The admin dashboard's entry on the admin index (:mod:`mcp_oauth.admin.dashboard`); no table of its own."""

    class Meta:
        proxy = True
        verbose_name = _("MCP dashboard")
        verbose_name_plural = _("MCP dashboard")
