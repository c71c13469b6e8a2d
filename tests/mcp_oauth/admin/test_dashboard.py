"""The admin's MCP dashboard (mcp_oauth.admin.dashboard): its figures from the audit trail, the
audit log, MCP tasks and the elicitation app's panel; its page, staff only. The browser test with
real traffic is tests/browser/test_admin_dashboard.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from elicitation.models import Elicitation
from mcp_oauth.admin.dashboard import dashboard_context
from mcp_oauth.admin.dashboard_charts import HEIGHT, column_chart, hbars
from mcp_oauth.audit import record
from mcp_oauth.models import AuditEvent, McpTask, ToolCallRecord

pytestmark = pytest.mark.django_db


def calls(now, *specs):
    """``(minutes_ago, tool, client_id, outcome)`` rows."""
    ToolCallRecord.objects.bulk_create(
        [
            ToolCallRecord(
                created_at=now - timedelta(minutes=ago),
                client_id=client,
                resource="http://testserver/mcp",
                tool=tool,
                era="modern",
                protocol_version="2026-07-28",
                outcome=outcome,
                duration_ms=1.0,
            )
            for ago, tool, client, outcome in specs
        ]
    )


def test_the_last_hour_has_sixty_minutes_with_their_calls_and_errors():
    now = timezone.now().replace(second=30)
    calls(
        now,
        (0, "a", "c1", "ok"),
        (0, "a", "c1", "error"),
        (1, "b", "c2", "tool_error"),
        (30, "a", "c2", "ok"),
        (61, "old", "c3", "ok"),  # outside the hour
    )
    figures = dashboard_context("1h", now=now)
    bars = figures["calls"].bars
    assert len(bars) == 60
    assert [(b.total, b.errors) for b in bars[-1:]] == [(2, 1)]
    assert (bars[-2].total, bars[-2].errors) == (1, 1)
    assert bars[-31].total == 1
    assert (figures["calls"].total, figures["calls"].errors) == (4, 2)
    assert [(r.label, r.value) for r in figures["top_tools"].rows] == [("a", 3), ("b", 1)]
    assert [(r.label, r.value) for r in figures["top_clients"].rows] == [("c1", 2), ("c2", 2)]
    assert bars[-1].label == timezone.localtime(now).strftime("%H:%M")


def test_the_ranges_and_an_unknown_one():
    now = timezone.now()
    calls(now, (60 * 5, "a", "c", "ok"), (60 * 24 * 3, "b", "c", "ok"))
    assert len(dashboard_context("24h", now=now)["calls"].bars) == 24
    assert dashboard_context("24h", now=now)["calls"].total == 1
    week = dashboard_context("7d", now=now)
    assert (len(week["calls"].bars), week["calls"].total) == (168, 2)
    first, last = week["calls"].bars[0].label, week["calls"].bars[-1].label
    assert first != last and first[:3] == last[:3]  # the same weekday a week apart: the date tells them apart
    assert last == timezone.localtime(now).strftime("%a %d %b %H:00")
    assert week["per_column"] == 0.01  # 2 calls / 168 hours, not 2 / 10,080 minutes rounded to 0.0
    assert dashboard_context("1h", now=now)["per_column"] == 0.0
    assert dashboard_context("forever", now=now)["range_key"] == "1h"


def test_grants_refusals_tasks_and_the_elicitation_panel(user, public_app, resource):
    for grant_type in ("authorization_code", "authorization_code", "client_credentials"):
        record(AuditEvent.Kind.TOKEN_ISSUED, client_id="c", detail={"grant_type": grant_type})
    record(AuditEvent.Kind.TOKEN_REFRESHED, client_id="c", detail={"grant_type": "refresh_token"})
    record(AuditEvent.Kind.TRUST_DENIED, client_id="c")
    record(AuditEvent.Kind.INVALID_RESOURCE, client_id="c")
    record(AuditEvent.Kind.INVALID_RESOURCE, client_id="c")
    record(AuditEvent.Kind.CONSENT_GRANTED, client_id="c")  # not a refusal
    for status in ("working", "working", "input_required", "completed"):
        McpTask.objects.create(tool_name="t", user=user, application=public_app, resource=resource, status=status)
    for status in ("accepted", "completed", "declined", "pending"):
        Elicitation.objects.create(message="m", status=status, user=user)
    figures = dashboard_context("24h")
    assert [(r.label, r.value) for r in figures["grants"].rows] == [
        ("authorization_code", 2),
        ("client_credentials", 1),
    ]
    assert [(r.label, r.value) for r in figures["refusals"].rows] == [
        ("invalid resource requested", 2),
        ("trust policy denied a client", 1),
    ]
    assert (figures["tasks_working"], figures["tasks_input_required"]) == (2, 1)
    [panel] = figures["panels"]
    assert panel["id"] == "elicitation"
    assert panel["ratio"] == (2, 3)  # accepted + completed, of the three that ended
    assert dict(panel["figures"])["pending"] == 1


def test_chart_geometry():
    chart = column_chart([("a", 10, 5), ("b", 0, 0), ("c", 5, 0)])
    assert [b.height for b in chart.bars] == [HEIGHT, 0, HEIGHT / 2]
    assert chart.bars[0].error_height == HEIGHT / 2 and chart.bars[0].error_y == HEIGHT / 2
    assert chart.peak == 10 and chart.total == 15 and chart.errors == 5
    assert column_chart([]).bars == [] and column_chart([("a", 0, 0)]).bars[0].height == 0
    bars = hbars([("x", 4), ("y", 1)])
    assert [(b.width, b.y) for b in bars.rows] == [(300, 0), (75, 22)] and bars.height == 44


def test_the_page_for_staff_and_for_no_one_else(admin_client, client, user):
    now = timezone.now()
    calls(now, (0, "a", "c1", "ok"))
    page = admin_client.get("/admin/mcp_oauth/toolcalldashboard/?range=24h")
    assert page.status_code == 200
    body = page.content.decode()
    assert body.count('<g class="column">') == 24
    assert 'id="mcp-calls-total">1<' in body
    assert admin_client.get("/admin/").content.decode().count("/admin/mcp_oauth/toolcalldashboard/") >= 1
    client.force_login(user)
    assert client.get("/admin/mcp_oauth/toolcalldashboard/")["Location"].startswith("/admin/login/")


def test_the_top_clients_are_named_by_their_registered_name_with_the_id_beside(public_app, client):
    now = timezone.now()
    calls(now, (0, "a", public_app.client_id, "ok"), (1, "a", public_app.client_id, "ok"), (2, "a", "gone", "ok"))
    rows = dashboard_context("1h", now=now)["top_clients"].rows
    assert [(r.label, r.value, r.detail) for r in rows] == [
        ("Test client", 2, public_app.client_id),
        ("gone", 1, ""),  # no application with that ID (deleted): its ID is the label
    ]


def test_the_dashboard_has_no_pages_of_its_rows(admin_client):
    """The proxy model's rows are tool calls: no change, history, delete or add page of the
    dashboard shows one (they have their own admin)."""
    calls(timezone.now(), (0, "a", "c1", "ok"))
    pk = ToolCallRecord.objects.get().pk
    base = "/admin/mcp_oauth/toolcalldashboard/"
    statuses = [
        admin_client.get(base + tail).status_code
        for tail in (f"{pk}/change/", f"{pk}/history/", f"{pk}/delete/", "add/")
    ]
    assert statuses == [404, 404, 404, 404]
    assert admin_client.get(base).status_code == 200
    assert admin_client.get(f"/admin/mcp_oauth/toolcallrecord/{pk}/change/").status_code == 200
