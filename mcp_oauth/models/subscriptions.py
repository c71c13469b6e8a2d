"""Resource subscriptions of 2025-11-25 sessions (MCP "Resources" / "Subscriptions")."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_oauth.models.core import McpSession


class ResourceSubscription(models.Model):
    """``resources/subscribe`` of one session to one URI; removed by ``resources/unsubscribe``
    and with the session. ``notifications/resources/updated`` for the URI go to the
    session's outbox, and only if the session's user may still read the resource.
    """

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="resource_subscriptions")
    uri = models.CharField(max_length=2048)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = _("resource subscription")
        verbose_name_plural = _("resource subscriptions")
        constraints = [models.UniqueConstraint(fields=["session", "uri"], name="mcp_oauth_subscription_unique")]
        indexes = [models.Index(fields=["uri"], name="mcp_oauth_subscription_uri")]

    def __str__(self) -> str:
        return f"{self.uri} ({self.session_id[:8]}…)"
