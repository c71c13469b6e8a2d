"""Attacks on the admin's MCP dashboard (mcp_oauth.admin.dashboard): the tool names and client ids
it charts are chosen by clients (an unknown tool is recorded as sent; a CIMD client id is any
https URL), so they reach the SVG and the tables as text, never as markup."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from mcp_oauth.models import ToolCallRecord

pytestmark = pytest.mark.django_db

PAGE = "/admin/mcp_oauth/toolcalldashboard/"

HOSTILE = [
    '<script>alert("t")</script>',
    '"><svg onload=alert(1)>',
    "</text></svg><img src=x onerror=alert(1)>",
    "]]><script>alert(2)</script>",
    "&lt;script&gt;",
    "javascript:alert(3)",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_tool_names_and_client_ids_are_escaped_in_the_svg_and_the_tables(admin_client, hostile):
    ToolCallRecord.objects.create(
        created_at=timezone.now(),
        client_id="https://evil.example/" + hostile,
        resource="http://testserver/mcp",
        tool=hostile,
        era="modern",
        protocol_version="2026-07-28",
        outcome="error",
        duration_ms=1.0,
    )
    page = admin_client.get(PAGE + "?range=1h")
    assert page.status_code == 200
    html = page.content.decode()
    if any(ch in hostile for ch in '<>"&'):
        assert hostile not in html  # nowhere as markup
    assert "<script>alert" not in html
    assert "<svg onload" not in html and "<img src=x" not in html
    assert 'href="javascript' not in html
    escaped = hostile.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    assert html.count(escaped) >= 1  # the table cell shows the name as text


@pytest.mark.parametrize("range_key", ["9999999d", "-1h", "1h' OR 1=1", "", "x" * 10_000, "1h\x00"])
def test_a_hostile_range_falls_back_to_the_last_hour(admin_client, range_key):
    page = admin_client.get(PAGE, {"range": range_key})
    assert page.status_code == 200
    assert page.context["range_key"] == "1h"


def test_staff_without_the_view_permission_and_anonymous_users_are_refused(client, django_user_model):
    staff = django_user_model.objects.create_user("clerk", password="pw-pw-pw-1", is_staff=True)
    client.force_login(staff)
    assert client.get(PAGE).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_toolcallrecord"))
    staff = django_user_model.objects.get(pk=staff.pk)
    client.force_login(staff)
    assert client.get(PAGE).status_code == 200  # the view permission of tool calls is enough
    client.logout()
    anonymous = client.get(PAGE)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
