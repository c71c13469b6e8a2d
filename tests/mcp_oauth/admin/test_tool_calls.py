"""The tool-call audit trail's admin screen (mcp_oauth.admin.tool_calls): read only, filterable, the export action; staff only."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.mcp_oauth.observability.test_audit_trail_export import (  # noqa: F401 - fixtures and helpers
    rows,
)

pytestmark = pytest.mark.django_db


def test_the_admin_list_is_read_only_and_filterable(rows, staff):
    page = staff.get("/admin/mcp_oauth/toolcallrecord/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "client-b" in body and "search" in body
    assert "Add tool call" not in body
    assert staff.get("/admin/mcp_oauth/toolcallrecord/add/").status_code == 403
    filtered = staff.get("/admin/mcp_oauth/toolcallrecord/?outcome__exact=error").context["cl"]
    assert [r.pk for r in filtered.result_list] == [rows[1].pk]
    by_tool = staff.get("/admin/mcp_oauth/toolcallrecord/?tool=echo").context["cl"]
    assert sorted(r.pk for r in by_tool.result_list) == [rows[0].pk, rows[2].pk]
    by_client = staff.get("/admin/mcp_oauth/toolcallrecord/?client_id=client-b").context["cl"]
    assert [r.pk for r in by_client.result_list] == [rows[2].pk]
    searched = staff.get("/admin/mcp_oauth/toolcallrecord/?q=" + "f" * 32).context["cl"]
    assert [r.pk for r in searched.result_list] == [rows[2].pk]
    detail = staff.get(f"/admin/mcp_oauth/toolcallrecord/{rows[2].pk}/change/")
    assert detail.status_code == 200 and "&quot;q&quot;" in detail.content.decode()


def test_the_admin_export_action_streams_the_selection(rows, staff):
    response = staff.post(
        "/admin/mcp_oauth/toolcallrecord/",
        {"action": "export_csv", "_selected_action": [rows[0].pk, rows[2].pk], "select_across": "0", "index": "0"},
    )
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="tool-calls-')
    text = b"".join(response.streaming_content).decode()
    assert [r["id"] for r in csv.DictReader(io.StringIO(text))] == [str(rows[0].pk), str(rows[2].pk)]
    everything = staff.post(
        "/admin/mcp_oauth/toolcallrecord/?outcome__exact=ok",
        {"action": "export_jsonl", "_selected_action": [rows[0].pk], "select_across": "1", "index": "0"},
    )
    lines = b"".join(everything.streaming_content).decode().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [rows[0].pk, rows[2].pk]


def test_non_staff_get_the_admin_login(client, user, rows):
    client.force_login(user)
    for path in ("/admin/mcp_oauth/toolcallrecord/", "/admin/mcp_oauth/toolcalldashboard/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


@pytest.fixture
def staff(admin_client):
    return admin_client
