"""The tool-call audit trail's export (mcp_oauth.observability.audit_trail_export: exact columns in
order, paged) and its retention. The command's options are in
tests/mcp_oauth/management/commands/test_export_tool_calls.py, a user's data in
test_audit_trail_users.py, the admin screen in tests/mcp_oauth/admin/test_tool_calls.py."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from mcp_oauth import retention
from mcp_oauth.models import ToolCallRecord
from mcp_oauth.observability.audit_trail_export import COLUMNS

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_committed_trail_rows")]

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def row(**values):
    defaults = {
        "created_at": T0,
        "client_id": "client-a",
        "resource": "http://testserver/mcp",
        "tool": "echo",
        "method": "tools/call",
        "era": "modern",
        "protocol_version": "2026-07-28",
        "outcome": "ok",
        "duration_ms": 1.5,
        "arguments_digest": "ab" * 32,
    }
    return ToolCallRecord(**{**defaults, **values})


@pytest.fixture
def rows(user):
    return ToolCallRecord.objects.bulk_create(
        [
            row(user=user),
            row(created_at=T0 + timedelta(hours=1), tool="search", outcome="error", error_code=-32602),
            row(created_at=T0 + timedelta(days=1), client_id="client-b", arguments={"q": 'é,"x"'}, trace_id="f" * 32),
        ]
    )


# --- retention -------------------------------------------------------------------------------


def test_retention_deletes_rows_older_than_the_setting(settings):
    now = timezone.now()
    ToolCallRecord.objects.bulk_create(
        [row(created_at=now - timedelta(days=days)) for days in (1, 89, 91, 200)] + [row(created_at=now)]
    )
    assert retention.prune(now)["tool_calls"] == 2
    assert sorted(round((now - r.created_at) / timedelta(days=1)) for r in ToolCallRecord.objects.all()) == [0, 1, 89]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_RETENTION_DAYS": 0.5}
    assert retention.prune(now)["tool_calls"] == 2
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_RETENTION_DAYS": None}
    assert retention.prune(now + timedelta(days=999))["tool_calls"] == 0
    assert ToolCallRecord.objects.count() == 1


def test_the_cleanup_task_applies_it(settings):
    from mcp_oauth.tasks import cleanup

    ToolCallRecord.objects.bulk_create([row(created_at=timezone.now() - timedelta(days=100))])
    assert cleanup()["tool_calls"] == 1


def test_a_bad_retention_setting_is_a_check_error(settings):
    from mcp_oauth.checks import check_retention

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_RETENTION_DAYS": "90"}
    assert [e.id for e in check_retention(None)] == ["mcp_oauth.E120"]


# --- export ----------------------------------------------------------------------------------


def test_export_jsonl_has_every_column_in_order(rows, user):
    out = io.StringIO()
    call_command("export_tool_calls", stdout=out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [list(line) for line in lines] == [list(COLUMNS)] * 3
    assert COLUMNS == (
        "id",
        "created_at",
        "user_id",
        "client_id",
        "resource",
        "method",
        "tool",
        "era",
        "protocol_version",
        "outcome",
        "error_code",
        "duration_ms",
        "arguments_digest",
        "arguments",
        "trace_id",
    )
    assert lines[0] == {
        "id": rows[0].pk,
        "created_at": "2026-12-01T12:00:00+00:00",
        "user_id": user.pk,
        "client_id": "client-a",
        "resource": "http://testserver/mcp",
        "method": "tools/call",
        "tool": "echo",
        "era": "modern",
        "protocol_version": "2026-07-28",
        "outcome": "ok",
        "error_code": None,
        "duration_ms": 1.5,
        "arguments_digest": "ab" * 32,
        "arguments": None,
        "trace_id": "",
    }
    assert lines[2]["arguments"] == {"q": 'é,"x"'}


def test_export_pages_through_more_rows_than_a_page(monkeypatch):
    from mcp_oauth.observability import audit_trail_export

    ToolCallRecord.objects.bulk_create([row(tool=f"t{n}") for n in range(25)])
    got = list(audit_trail_export.records(page_size=7))
    assert [r["tool"] for r in got] == [f"t{n}" for n in range(25)]
