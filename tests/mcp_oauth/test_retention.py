"""Retention (issue 28): one setting per growing table, applied by the periodic cleanup in bounded batches."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.checks import run_checks
from django.utils import timezone

from elicitation.models import Elicitation
from elicitation.tasks import cleanup as elicitation_cleanup
from mcp_oauth.models import AuditEvent, ClientMetadataDocument, McpTask, UsedAssertion
from mcp_oauth.tasks import cleanup

pytestmark = pytest.mark.django_db


def _ago(days: float):
    return timezone.now() - timedelta(days=days)


def test_cleanup_applies_every_retention_setting(settings, user, resource, public_app):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "AUDIT_RETENTION_DAYS": 100,
        "AUDIT_IP_RETENTION_DAYS": 10,
        "TASK_RETENTION_DAYS": 5,
        "USED_ASSERTION_RETENTION_SECONDS": 3600,
        "CIMD_CACHE_RETENTION_DAYS": 20,
    }
    AuditEvent.objects.create(kind="token.issued", created_at=_ago(101), ip_address="203.0.113.1")
    mid = AuditEvent.objects.create(kind="token.issued", created_at=_ago(11), ip_address="203.0.113.2")
    fresh = AuditEvent.objects.create(kind="token.issued", created_at=_ago(1), ip_address="203.0.113.3")
    task = {"tool_name": "t", "user": user, "resource": resource, "protocol_version": "2026-07-28"}
    McpTask.objects.create(**task, status="completed", finished_at=_ago(6))
    McpTask.objects.create(**task, status="cancelled", updated_at=_ago(6))
    kept_finished = McpTask.objects.create(**task, status="failed", finished_at=_ago(4))
    running = McpTask.objects.create(**task, status="working", created_at=_ago(60), updated_at=_ago(60))
    UsedAssertion.objects.create(
        key="a" * 64, kind="id_jag", issuer="x", expires_at=timezone.now() - timedelta(hours=2)
    )
    grace = UsedAssertion.objects.create(
        key="b" * 64, kind="id_jag", issuer="x", expires_at=timezone.now() - timedelta(minutes=5)
    )
    old_unused = ClientMetadataDocument.objects.create(client_id="https://gone.example.com/c")
    used = ClientMetadataDocument.objects.create(
        client_id="https://used.example.com/c", application=public_app, document={}
    )
    recent = ClientMetadataDocument.objects.create(client_id="https://new.example.com/c")
    ClientMetadataDocument.objects.filter(pk__in=[old_unused.pk, used.pk]).update(updated_at=_ago(21))

    counts = cleanup()

    assert counts["audit_events"] == 1 and counts["audit_ips_cleared"] == 1
    assert set(AuditEvent.objects.values_list("pk", flat=True)) == {mid.pk, fresh.pk}
    assert AuditEvent.objects.get(pk=mid.pk).ip_address is None
    assert AuditEvent.objects.get(pk=fresh.pk).ip_address == "203.0.113.3"
    assert counts["tasks"] == 2
    assert set(McpTask.objects.values_list("pk", flat=True)) == {kept_finished.pk, running.pk}
    assert counts["used_assertions"] == 1 and list(UsedAssertion.objects.values_list("pk", flat=True)) == [grace.pk]
    assert counts["cimd_documents"] == 1
    assert set(ClientMetadataDocument.objects.values_list("pk", flat=True)) == {used.pk, recent.pk}


def test_none_keeps_the_rows(settings, user, resource):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "AUDIT_RETENTION_DAYS": None, "AUDIT_IP_RETENTION_DAYS": None}
    AuditEvent.objects.create(kind="token.issued", created_at=_ago(5000), ip_address="203.0.113.1")
    counts = cleanup()
    assert counts["audit_events"] == 0 and AuditEvent.objects.get().ip_address == "203.0.113.1"


def test_elicitation_retention_is_batched(settings, user):
    settings.ELICITATION = {**settings.ELICITATION, "RETENTION_DAYS": 30}
    Elicitation.objects.create(user=user, message="old", status="accepted", completed_at=_ago(31))
    kept = Elicitation.objects.create(user=user, message="new", status="accepted", completed_at=_ago(1))
    pending = Elicitation.objects.create(user=user, message="pending")
    assert elicitation_cleanup() == 1
    assert set(Elicitation.objects.values_list("pk", flat=True)) == {kept.pk, pending.pk}


@pytest.mark.parametrize("value", [-1, "30", True])
def test_a_bad_retention_setting_is_an_error(settings, value):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "AUDIT_RETENTION_DAYS": value}
    assert "mcp_oauth.E120" in {message.id for message in run_checks()}
