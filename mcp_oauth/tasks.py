"""Celery tasks of the app.

``mcp_oauth.tasks.cleanup`` deletes what is no longer needed: MCP sessions that
ended or idled out (their outbox goes with them) and redeemed-code records older
than ``MCP_OAUTH["REDEEMED_CODE_RETENTION_SECONDS"]``. Schedule it with Celery beat,
e.g. hourly::

    CELERY_BEAT_SCHEDULE = {
        "mcp-oauth-cleanup": {"task": "mcp_oauth.tasks.cleanup", "schedule": 3600},
    }
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.utils import timezone


@shared_task(name="mcp_oauth.tasks.cleanup", ignore_result=True)
def cleanup() -> dict[str, int]:
    """Delete dead sessions and old redeemed-code records.

    :returns: ``{"sessions": n, "redeemed_codes": m}`` — rows deleted (outbox rows not counted).
    """
    from .models import McpSession, RedeemedAuthorizationCode
    from .settings import mcp_oauth_settings

    now = timezone.now()
    idle_cutoff = now - timedelta(seconds=mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS)
    dead = McpSession.objects.filter(ended_at__isnull=False) | McpSession.objects.filter(last_seen_at__lt=idle_cutoff)
    sessions = dead.count()
    dead.delete()
    code_cutoff = now - timedelta(seconds=mcp_oauth_settings.REDEEMED_CODE_RETENTION_SECONDS)
    codes, _ = RedeemedAuthorizationCode.objects.filter(redeemed_at__lt=code_cutoff).delete()
    return {"sessions": sessions, "redeemed_codes": codes}
