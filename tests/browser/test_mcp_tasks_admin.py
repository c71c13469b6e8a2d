"""In Chromium: an administrator lists MCP tasks (status, owner, client, timings) and cancels a
running one and a queued one with the admin action; the running tool sees the cancellation."""

from __future__ import annotations

import asyncio
import time

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from mcp_oauth.mcp_server.mcp_tasks import jobs
from mcp_oauth.models import McpTask
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import SEEN, TASK_CAPS
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "task-admin", "admin-password-tasks"


def _wait(predicate, timeout=10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_admin_lists_tasks_and_cancels_them_in_chromium(
    live, settings, chromium_executable, request, user, public_app, resource
):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.mcp_tasks.test_runner.REGISTRY",
        "TASKS_EXECUTOR": "thread",
        "TASKS_CANCEL_POLL_SECONDS": 0.05,
    }
    SEEN["cancelled"].clear()
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    common = dict(
        user=user,
        application=public_app,
        resource=resource,
        scopes="mcp",
        protocol_version="2026-07-28",
        client_capabilities=TASK_CAPS,
        queued_at=timezone.now(),
    )
    running = McpTask.objects.create(tool_name="compute", arguments={"seconds": 60, "label": "admin"}, **common)
    queued = McpTask.objects.create(tool_name="compute", arguments={"label": "queued"}, **common)
    jobs.dispatch(running.pk)
    assert _wait(lambda: McpTask.objects.get(pk=running.pk).lease != "")

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await page.goto(live.base + "/admin/mcp_oauth/mcptask/")
            await shot(page, "admin-mcp-tasks")
            listed = await page.inner_text("#result_list")
            headers = await page.inner_text("#result_list thead")
            for task in (running, queued):
                await page.check(f'input[name="_selected_action"][value="{task.pk}"]')
            await page.select_option('select[name="action"]', "cancel_tasks")
            async with page.expect_navigation():
                await page.click('button[name="index"]')
            await shot(page, "admin-mcp-tasks-cancelled")
            return listed, headers, await page.inner_text(".messagelist")

    listed, headers, message = asyncio.run(scenario())
    assert "compute" in listed and user.username in listed and public_app.name in listed
    for column in ("TASK", "TOOL NAME", "STATUS", "USER", "APPLICATION", "CREATED AT", "STARTED AT", "FINISHED AT"):
        assert column in headers.upper(), headers
    assert "2 task(s) cancelled." in message
    queued.refresh_from_db()
    assert queued.status == "cancelled" and queued.started_at is None
    assert _wait(lambda: McpTask.objects.get(pk=running.pk).status == "cancelled")
    assert SEEN["cancelled"] == [("admin", True)]
