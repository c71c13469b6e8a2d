"""Tools of the task end-to-end tests, loaded by the server and Celery worker processes those tests
start (``MCP_OAUTH["TOOL_MODULES"] = ["tests.support.task_tools"]`` through ``TEST_WORKER_MCP_OAUTH``).

Every finished run of ``long_job`` appends ``<taskId> <label>`` to the file named by
``MCP_TASKS_RUN_LOG``: a task whose result were produced twice would appear twice.
"""

from __future__ import annotations

import asyncio
import os
import time

from mcp_oauth.mcp_server.mcp_tasks import TaskPolicy
from mcp_oauth.mcp_server.tools import InputRequest, ToolContext, tool

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@tool(
    description="Works for `seconds`, then reports (a task; run again once if its worker dies)",
    task=TaskPolicy("optional", max_retries=1),
)
async def long_job(ctx: ToolContext, seconds: float = 1.0, label: str = "") -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        await asyncio.sleep(0.1)
    path = os.environ.get("MCP_TASKS_RUN_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"{ctx.task.task_id} {label}\n")
    return f"{label} done by {ctx.task.task_id}"


@tool(description="Asks for confirmation, then answers (always a task)", task="always")
async def ask_job(ctx: ToolContext, filename: str) -> str:
    answer = (await ctx.request_inputs({"confirm": InputRequest.elicit(f"Delete {filename}?", CONFIRM)}))["confirm"]
    confirmed = answer.get("action") == "accept" and (answer.get("content") or {}).get("confirm") is True
    return f"deleted {filename}" if confirmed else f"kept {filename}"


@tool(
    description="Blocks its own event loop for `seconds` (time.sleep in an async tool), then reports",
    task=TaskPolicy("optional", max_retries=1),
)
async def blocking_job(ctx: ToolContext, seconds: float = 1.0, label: str = "") -> str:
    """Every start appends ``start <taskId> <attempt> <idempotency key>`` to ``MCP_TASKS_RUN_LOG``
    and every end ``end <taskId> <attempt>``: a second copy of the run would show a second start."""
    path = os.environ.get("MCP_TASKS_RUN_LOG")

    def log(line: str) -> None:
        if path:
            with open(path, "a", encoding="utf-8") as out:
                out.write(line + "\n")

    log(f"start {ctx.task.task_id} {ctx.task.attempt} {ctx.task.idempotency_key}")
    time.sleep(seconds)
    holds = await ctx.task.holds_lease()
    log(f"end {ctx.task.task_id} {ctx.task.attempt} {holds}")
    return f"{label} done by {ctx.task.task_id} on attempt {ctx.task.attempt}"
