"""The CIMD cache screen (mcp_oauth.admin.cimd): refresh now despite the backoff; no entry added or edited by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.models import ClientMetadataDocument
from tests.mcp_oauth.admin.test_admin import (  # noqa: F401 - fixtures and helpers
    CIMD_URL,
    act,
    admin,
    messages_of,
    populated,
    url,
)

pytestmark = pytest.mark.django_db


def test_refresh_now_starts_a_fetch_despite_the_backoff(admin, populated, monkeypatch):
    from mcp_oauth.authorization_server.cimd import cache as cimd_cache

    entry = ClientMetadataDocument.objects.get()
    ClientMetadataDocument.objects.filter(pk=entry.pk).update(retry_after=timezone.now() + timedelta(hours=1))
    calls = []
    monkeypatch.setattr(cimd_cache, "start_fetch", lambda e, ip, refresh=False: calls.append((e.pk, refresh)) or True)
    response = act(admin, ClientMetadataDocument, "refresh_now", [entry])
    assert calls == [(entry.pk, True)]
    assert any("Refresh started for 1" in m for m in messages_of(response))
    entry.refresh_from_db()
    assert entry.retry_after is None


def test_cimd_entries_are_not_added_or_edited_by_hand(admin, populated):
    entry = ClientMetadataDocument.objects.get()
    assert admin.get(url(ClientMetadataDocument, "add")).status_code == 403
    admin.post(url(ClientMetadataDocument, "change", entry.pk), {"client_id": "https://evil.example/x"})
    entry.refresh_from_db()
    assert entry.client_id == CIMD_URL
