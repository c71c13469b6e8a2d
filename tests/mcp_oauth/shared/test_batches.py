"""Batched deletes (mcp_oauth.shared.batches): key ranges walked, rows never loaded."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_oauth.models import AuditEvent
from mcp_oauth.shared.batches import delete_in_batches, update_in_batches

pytestmark = pytest.mark.django_db


def test_batches_walk_key_ranges_and_never_load_the_rows():
    AuditEvent.objects.bulk_create([AuditEvent(kind="token.issued", client_id=str(i)) for i in range(95)])
    keep = AuditEvent.objects.create(kind="token.revoked")
    with CaptureQueriesContext(connection) as queries:
        deleted = delete_in_batches(AuditEvent.objects.filter(kind="token.issued"), batch_size=10)
    assert deleted == 95
    assert list(AuditEvent.objects.values_list("pk", flat=True)) == [keep.pk]
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) == 10  # one statement per range of at most 10 rows
    # No statement reads more than one key per step (LIMIT 1) or the rows themselves.
    selects = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert all("LIMIT 1" in sql for sql in selects), selects
    AuditEvent.objects.bulk_create([AuditEvent(kind="token.issued", ip_address="203.0.113.9") for _ in range(23)])
    assert update_in_batches(AuditEvent.objects.filter(ip_address__isnull=False), batch_size=7, ip_address=None) == 23
    assert not AuditEvent.objects.filter(ip_address__isnull=False).exists()
