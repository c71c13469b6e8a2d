"""Durable tasks of the MCP Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663).

One row per task a ``tools/call`` created (:mod:`mcp_oauth.mcp_server.mcp_tasks`). The row is written (and
committed) before the ``CreateTaskResult`` is returned, so an immediate ``tasks/get`` finds it;
the tool then runs on an executor (a Celery worker) that claims the row with a lease and keeps a
heartbeat. The row is bound to the user, client and resource of the token that created it.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models.core import ProtectedResource

__all__ = ["McpTask", "new_task_id"]


def new_task_id() -> str:
    """A task id: 256 random bits, URL-safe (SEP-2663 "Task ID unguessability")."""
    return secrets.token_urlsafe(32)


class McpTask(models.Model):
    """One task: what runs (tool, arguments), for whom, its status and its outcome.

    ``input_state`` (the executor's multi-round state: ``asked``/``settled``/``responses``/``wire``/
    ``issued``) and ``input_requests`` (the outstanding ``inputRequests``, wire key -> request)
    drive ``input_required``. ``lease``/``heartbeat_at`` tell a running task from a lost one.
    """

    class Status(models.TextChoices):
        WORKING = "working", _("working")
        INPUT_REQUIRED = "input_required", _("input required")
        COMPLETED = "completed", _("completed")
        FAILED = "failed", _("failed")
        CANCELLED = "cancelled", _("cancelled")

    TERMINAL = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})

    task_id = models.CharField(max_length=64, unique=True, default=new_task_id, editable=False)
    tool_name = models.CharField(max_length=128)
    arguments = models.JSONField(default=dict, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, null=True, on_delete=models.CASCADE, related_name="+"
    )
    resource = models.ForeignKey(ProtectedResource, on_delete=models.CASCADE, related_name="+")
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("The organization the task's token acts for."),
    )
    scopes = models.TextField(blank=True, default="")
    protocol_version = models.CharField(max_length=20)
    client_capabilities = models.JSONField(default=dict, blank=True)

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.WORKING, db_index=True)
    status_message = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    ttl_ms = models.BigIntegerField(null=True, blank=True)
    poll_interval_ms = models.PositiveIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)

    result = models.JSONField(null=True, blank=True)
    sealed_result = models.TextField(blank=True, default="")
    error = models.JSONField(null=True, blank=True)
    input_state = models.JSONField(default=dict, blank=True)
    input_requests = models.JSONField(default=dict, blank=True)

    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    lease = models.CharField(max_length=64, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    max_retries = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name = _("MCP task")
        verbose_name_plural = _("MCP tasks")
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"], name="mcp_oauth_task_status_beat"),
            # The admin's Task list newest first: everyone's, and an organization's (mcp_oauth.admin.tasks).
            models.Index(fields=["created_at", "id"], name="mcp_oauth_task_created"),
            models.Index(fields=["organization", "created_at", "id"], name="mcp_oauth_task_org_time"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.task_id[:8]}… ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()
