"""The heartbeat of a running task (mcp_oauth.mcp_server.mcp_tasks.heartbeat): a thread, so a tool blocking its loop longer than the lease keeps it."""

from __future__ import annotations

import threading
import time

import pytest

from mcp_oauth.mcp_server.mcp_tasks import TaskPolicy, jobs
from mcp_oauth.mcp_server.tools import ToolContext
from mcp_oauth.models import McpTask
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import (  # noqa: F401 - fixtures
    REGISTRY,
    SEEN,
    TASK_CAPS,
    V,
    _settings,
    _wait,
    client,
    error,
    poll,
    post,
    result,
    start,
    token,
)

pytestmark = pytest.mark.django_db(transaction=True)


@REGISTRY.tool(task=TaskPolicy("optional", max_retries=1))
async def blocking(ctx: ToolContext, seconds: float = 1.0) -> str:
    SEEN["runs"].append(("blocking", ctx.task.attempt, ctx.task.idempotency_key))
    await ctx.task.set_status_message("blocking the loop")
    time.sleep(seconds)
    return f"unblocked on attempt {ctx.task.attempt}"


def test_an_async_tool_blocking_its_loop_longer_than_the_lease_keeps_it(client, token, settings):
    """Issue #28: the heartbeat ran on the tool's loop; a tool that blocked it (``time.sleep``)
    for longer than the lease was declared lost and (``max_retries=1``) ran a second time."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TASKS_LEASE_SECONDS": 0.5}
    task_id = start(client, token, "blocking", {"seconds": 2.0})["taskId"]
    assert _wait(lambda: McpTask.objects.get(task_id=task_id).status_message == "blocking the loop")
    deadline = time.monotonic() + 2.5
    healed = []
    while time.monotonic() < deadline:  # the reconciler runs all along (beat every 10 s in production)
        healed.append(jobs.reconcile_task(McpTask.objects.get(task_id=task_id).pk))
        time.sleep(0.1)
    done = poll(client, token, task_id)
    assert set(healed) == {None}
    assert done["status"] == "completed", done
    assert done["result"]["content"] == [{"type": "text", "text": "unblocked on attempt 1"}]
    (run,) = SEEN["runs"]
    assert run[:2] == ("blocking", 1) and len(run[2]) == 64
    row = McpTask.objects.get(task_id=task_id)
    assert (row.attempts, row.lease, row.heartbeat_at) == (1, "", None)
    # the run's heartbeat thread ended with it
    assert _wait(lambda: not [t for t in threading.enumerate() if t.name == f"mcp-task-heartbeat-{row.pk}"])
