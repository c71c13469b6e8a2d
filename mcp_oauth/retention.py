"""Retention: how long each growing table keeps its rows, and the prune that enforces it.

One setting per table (``MCP_OAUTH``; documented defaults in the settings reference), applied by
:func:`prune` (run by the periodic ``mcp_oauth.tasks.cleanup``) in bounded batches
(:mod:`mcp_oauth.shared.batches`: primary-key ranges, never all rows in memory):

==================================  ==========================================================
``AUDIT_RETENTION_DAYS`` (365)      audit events older than this are deleted
``AUDIT_IP_RETENTION_DAYS`` (30)    IP addresses of audit events older than this are cleared
                                    (the event stays); an erased user's events lose theirs at once
``TASK_RETENTION_DAYS`` (30)        finished MCP tasks (completed, failed, cancelled) this long
                                    after they finished; a task with a ``ttl`` goes at its expiry
                                    (the reconciler) whichever comes first
``USED_ASSERTION_RETENTION_SECONDS``  ``jti`` records of JWT assertions are kept this long past
(0)                                 the assertion's expiry (never less: the replay check needs them)
``CIMD_CACHE_RETENTION_DAYS`` (30)  cached Client ID Metadata Documents that no client uses (no
                                    application, or no valid document) untouched this long
``TOOL_CALL_RETENTION_DAYS`` (90)   tool-call audit trail rows (:class:`~mcp_oauth.models.ToolCallRecord`)
                                    older than this (the "last used" times stay)
==================================  ==========================================================

``None`` switches a rule off (the rows are kept). DPoP proof ``jti`` records are not a table:
they live in the token cache and expire with their window (``DPOP_PROOF_MAX_AGE_SECONDS`` +
``DPOP_PROOF_LEEWAY_SECONDS``); DPoP bindings go when their token expires
(:func:`mcp_oauth.dpop.bindings.prune_bindings`); elicitations follow ``ELICITATION["RETENTION_DAYS"]``
(``elicitation.tasks.cleanup``); redeemed codes ``REDEEMED_CODE_RETENTION_SECONDS``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from mcp_oauth.models import AuditEvent, ClientMetadataDocument, McpTask, ToolCallRecord, UsedAssertion
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.batches import delete_in_batches, update_in_batches

__all__ = ["prune"]


def _days_ago(now: datetime, days: float | None) -> datetime | None:
    return None if days is None else now - timedelta(days=float(days))


def prune_audit(now: datetime) -> dict[str, int]:
    """Delete audit events past ``AUDIT_RETENTION_DAYS``; clear IPs past ``AUDIT_IP_RETENTION_DAYS``."""
    counts = {"audit_events": 0, "audit_ips_cleared": 0}
    cutoff = _days_ago(now, mcp_oauth_settings.AUDIT_RETENTION_DAYS)
    if cutoff is not None:
        counts["audit_events"] = delete_in_batches(AuditEvent.objects.filter(created_at__lt=cutoff))
    ip_cutoff = _days_ago(now, mcp_oauth_settings.AUDIT_IP_RETENTION_DAYS)
    if ip_cutoff is not None:
        counts["audit_ips_cleared"] = update_in_batches(
            AuditEvent.objects.filter(created_at__lt=ip_cutoff, ip_address__isnull=False), ip_address=None
        )
    return counts


def prune_tasks(now: datetime) -> int:
    """Delete finished MCP tasks past ``TASK_RETENTION_DAYS`` (from ``finished_at``, else ``updated_at``)."""
    cutoff = _days_ago(now, mcp_oauth_settings.TASK_RETENTION_DAYS)
    if cutoff is None:
        return 0
    finished = McpTask.objects.filter(status__in=[str(status) for status in McpTask.TERMINAL])
    old = finished.filter(Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, updated_at__lt=cutoff))
    return delete_in_batches(old)


def prune_used_assertions(now: datetime) -> int:
    """Delete ``jti`` records ``USED_ASSERTION_RETENTION_SECONDS`` past their assertion's expiry."""
    keep = mcp_oauth_settings.USED_ASSERTION_RETENTION_SECONDS
    if keep is None:
        return 0
    return delete_in_batches(UsedAssertion.objects.filter(expires_at__lt=now - timedelta(seconds=float(keep))))


def prune_cimd_cache(now: datetime) -> int:
    """Delete cached metadata documents no client uses, untouched for ``CIMD_CACHE_RETENTION_DAYS``."""
    cutoff = _days_ago(now, mcp_oauth_settings.CIMD_CACHE_RETENTION_DAYS)
    if cutoff is None:
        return 0
    unused = ClientMetadataDocument.objects.filter(Q(application__isnull=True) | Q(document__isnull=True))
    return delete_in_batches(
        unused.filter(updated_at__lt=cutoff).filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
    )


def prune_tool_calls(now: datetime) -> int:
    """Delete tool-call audit trail rows older than ``TOOL_CALL_RETENTION_DAYS`` (by ``created_at``)."""
    cutoff = _days_ago(now, mcp_oauth_settings.TOOL_CALL_RETENTION_DAYS)
    if cutoff is None:
        return 0
    return delete_in_batches(ToolCallRecord.objects.filter(created_at__lt=cutoff))


def prune(now: datetime | None = None) -> dict[str, int]:
    """Apply every retention rule above. :returns: rows deleted (or cleared) per rule."""
    now = now or timezone.now()
    return {
        **prune_audit(now),
        "tasks": prune_tasks(now),
        "used_assertions": prune_used_assertions(now),
        "cimd_documents": prune_cimd_cache(now),
        "tool_calls": prune_tool_calls(now),
    }
