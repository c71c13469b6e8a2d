"""The audit log screen (mcp_oauth.admin.audit): read only, filtered by kind."""

from __future__ import annotations

import pytest

from mcp_oauth.models import AuditEvent
from tests.mcp_oauth.admin.test_admin import (  # noqa: F401 - fixtures and helpers
    act,
    admin,
    populated,
    url,
)

pytestmark = pytest.mark.django_db


def test_audit_log_is_read_only(admin, populated):
    event = AuditEvent.objects.first()
    assert admin.get(url(AuditEvent, "add")).status_code == 403
    assert admin.post(url(AuditEvent, "change", event.pk), {"kind": "token.revoked"}).status_code == 403
    assert admin.post(url(AuditEvent, "delete", event.pk), {"post": "yes"}).status_code == 403
    response = act(admin, AuditEvent, "delete_selected", [event], follow=False)
    assert AuditEvent.objects.filter(pk=event.pk, kind=event.kind).exists()
    assert response.status_code in (200, 302)
    page = admin.get(url(AuditEvent, "change", event.pk))
    assert page.status_code == 200 and "<pre>" in page.content.decode()


def test_audit_filter_by_kind(admin, populated):
    html = admin.get(url(AuditEvent) + "?kind__exact=trust.denied").content.decode()
    results = html.split('id="result_list"')[1].split("</table>")[0]
    assert "trust policy denied" in results and "token issued" not in results
