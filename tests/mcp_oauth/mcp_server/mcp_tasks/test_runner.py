"""The MCP Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) through the endpoint, in-process.

Tasks run on the thread executor of this process (the embedded default) against the real test
database; the Celery-worker and kill tests are in tests/topology/test_mcp_tasks_workers.py.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import traceback

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client
from django.utils import timezone

from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.checks import check_tasks
from mcp_oauth.mcp_server.mcp_tasks import TaskPolicy, jobs
from mcp_oauth.mcp_server.mcp_tasks.store import EXTENSION
from mcp_oauth.mcp_server.tools import McpError, ToolContext, ToolError, ToolRegistry
from mcp_oauth.models import McpTask
from mcp_oauth.signals import task_created, task_finished

pytestmark = pytest.mark.django_db(transaction=True)

REGISTRY = ToolRegistry("mcp-tasks-tests")
V = "2026-07-28"
TASK_CAPS = {"elicitation": {"form": {}}, "extensions": {EXTENSION: {}}}
SEEN: dict[str, list] = {"cancelled": [], "runs": []}


@REGISTRY.tool(task="optional")
async def compute(ctx: ToolContext, seconds: float = 0, label: str = "") -> str:
    SEEN["runs"].append(label)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        SEEN["cancelled"].append((label, ctx.task.cancelled))
        raise
    return f"done {label}"


@REGISTRY.tool(task="always")
def tool_error() -> str:
    raise ToolError("no luck")


@REGISTRY.tool(task="always")
def protocol_error() -> str:
    raise McpError(-32603, "broken")


@REGISTRY.tool(task=TaskPolicy("optional", encrypt_result=True))
def secret_result() -> dict:
    """Its result is kept encrypted (test_store.py reads it back; E093 needs such a tool)."""
    return {"secret": "s3cr3t"}


@REGISTRY.tool(task="optional")
async def fenced(ctx: ToolContext) -> str:
    SEEN["runs"].append(("fenced", ctx.task.attempt))
    try:
        while True:
            await asyncio.sleep(0.02)
    except asyncio.CancelledError:
        await ctx.task.set_status_message("a late write of a run that lost its lease")
        SEEN["cancelled"].append(("fenced", ctx.task.cancelled, ctx.task.lease_lost, await ctx.task.holds_lease()))
        raise


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "BASE_URL": "https://testserver",
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.mcp_tasks.test_runner.REGISTRY",
        "TASKS_EXECUTOR": "thread",
        "TASKS_CANCEL_POLL_SECONDS": 0.05,
        "TASKS_HEARTBEAT_SECONDS": 0.05,
        "TASKS_POLL_INTERVAL_MS": 100,
    }
    settings.ELICITATION = {"ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    SEEN["cancelled"].clear()
    SEEN["runs"].clear()


@pytest.fixture
def client():
    return Client()


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def post(client, token, method, params, caps=TASK_CAPS, name=None, **headers):
    params = {
        **params,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": caps,
        },
    }
    if name is None:
        name = params.get("name") if method == "tools/call" else params.get("taskId")
    h = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
    }
    if name is not None:
        h["Mcp-Name"] = name
    h.update(headers)
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=h)


def result(response) -> dict:
    assert response.status_code == 200, response.content
    data = response.json()
    assert "error" not in data, data
    return data["result"]


def error(response) -> dict:
    data = response.json()
    assert "result" not in data, data
    return data["error"]


def start(client, token, name, arguments=None, caps=TASK_CAPS) -> dict:
    return result(post(client, token, "tools/call", {"name": name, "arguments": arguments or {}}, caps=caps))


def poll(client, token, task_id, until=("completed", "failed", "cancelled"), timeout=15.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        got = result(post(client, token, "tasks/get", {"taskId": task_id}))
        if got["status"] in until or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


# --- lifecycle ------------------------------------------------------------------------------


def queued(user, application, resource, arguments: dict, **fields) -> McpTask:
    """A queued ``compute`` task of ``user`` through ``application``, not yet dispatched; ``fields``
    set or replace the row's other columns (a lease, a heartbeat, ``queued_at=None``)."""
    return McpTask.objects.create(
        tool_name="compute",
        arguments=arguments,
        user=user,
        application=application,
        resource=resource,
        scopes="mcp",
        protocol_version=V,
        client_capabilities=TASK_CAPS,
        **{"queued_at": timezone.now(), **fields},
    )


def test_create_then_poll_to_completed(client, token, user, public_app):
    created_signals, finished_signals = [], []
    task_created.connect(lambda **kw: created_signals.append(kw["task"].task_id), weak=False, dispatch_uid="t1")
    task_finished.connect(lambda **kw: finished_signals.append(kw["task"].status), weak=False, dispatch_uid="t2")
    try:
        created = start(client, token, "compute", {"seconds": 0.3, "label": "one"})
        assert created["resultType"] == "task"
        assert set(created) >= {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 100
        assert "result" not in created and "requestState" not in created and "inputRequests" not in created
        assert len(created["taskId"]) >= 43  # 256 random bits
        # durable before the answer: the row is there, bound to the token's user and client
        row = McpTask.objects.get(task_id=created["taskId"])
        assert (row.user, row.application, row.tool_name) == (user, public_app, "compute")
        first = result(post(client, token, "tasks/get", {"taskId": created["taskId"]}))
        assert first["resultType"] == "complete" and first["status"] in ("working", "completed")
        done = poll(client, token, created["taskId"])
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "done one"}]
        assert done["result"].get("isError", False) is False
        assert created_signals == [created["taskId"]] and finished_signals == ["completed"]
    finally:
        task_created.disconnect(dispatch_uid="t1")
        task_finished.disconnect(dispatch_uid="t2")
    assert SEEN["runs"] == ["one"]


def test_tool_error_completes_and_protocol_error_fails(client, token):
    tool_err = poll(client, token, start(client, token, "tool_error")["taskId"])
    assert tool_err["status"] == "completed"
    # the inlined result is what tools/call would have answered
    assert tool_err["result"] == {
        "content": [{"type": "text", "text": "no luck"}],
        "isError": True,
        "resultType": "complete",
    }
    failed = poll(client, token, start(client, token, "protocol_error")["taskId"])
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": -32603, "message": "broken"}
    assert "result" not in failed


def test_cancel_a_running_task_reaches_the_tool(client, token):
    task_id = start(client, token, "compute", {"seconds": 30, "label": "long"})["taskId"]
    poll(client, token, task_id, until=("working",))
    assert _wait(lambda: McpTask.objects.get(task_id=task_id).lease)
    ack = result(post(client, token, "tasks/cancel", {"taskId": task_id}))
    assert ack["resultType"] == "complete" and "status" not in ack
    done = poll(client, token, task_id)
    assert done["status"] == "cancelled"
    assert SEEN["cancelled"] == [("long", True)]
    # idempotent on a terminal task
    assert result(post(client, token, "tasks/cancel", {"taskId": task_id}))["resultType"] == "complete"


def test_a_task_cancelled_before_it_started_never_starts(client, token, resource, user, public_app):
    task = queued(user, public_app, resource, {"label": "never"})
    assert result(post(client, token, "tasks/cancel", {"taskId": task.task_id}))["resultType"] == "complete"
    assert jobs.runner.run_task(task.pk, jobs.dispatch) == "skipped"
    task.refresh_from_db()
    assert task.status == "cancelled" and task.started_at is None
    assert SEEN["runs"] == []


# --- reconciler -----------------------------------------------------------------------------


def test_a_run_that_lost_its_lease_is_cancelled_and_fenced(client, token):
    """The reconciler gave the task to another run (here: the lease is replaced): the old run is
    told (``lease_lost``, ``cancelled``), cancelled, and neither its status message nor its outcome is
    written over the new holder's."""
    task_id = start(client, token, "fenced")["taskId"]
    # the tool has started, so its run holds the lease it claimed; replacing the lease between the
    # claim and the start gives the task away before it runs (the test below)
    assert _wait(lambda: SEEN["runs"] == [("fenced", 1)], timeout=30.0), _state(task_id)
    McpTask.objects.filter(task_id=task_id).update(lease="another-run", status_message="the other run's message")
    assert _wait(lambda: SEEN["cancelled"] != [], timeout=30.0), _state(task_id)
    assert SEEN["cancelled"] == [("fenced", True, True, False)]
    time.sleep(0.3)  # the old run's _store has returned by now
    row = McpTask.objects.get(task_id=task_id)
    assert (row.status, row.lease, row.status_message) == ("working", "another-run", "the other run's message")
    assert row.result is None and row.error is None


def test_a_run_whose_task_is_given_away_right_after_its_claim_keeps_its_own_lease(resource, user, public_app):
    """A worker stopped (SIGSTOP, a descheduled process) between committing its claim and reading
    the row back loses the task to the reconciler and another run: when it goes on, it must hold
    the lease it wrote, not take the new holder's lease and attempt number from the row (it then
    ran the tool a second time as "attempt 2", with ``holds_lease()`` True and its outcome
    stored). It starts nothing, stores nothing, and the new holder's row is left as it is."""
    task = queued(user, public_app, resource, {"seconds": 0.5, "label": "given-away"})
    given_away = []

    def give_away_after_the_claim(execute, sql, params, many, context):
        claim_written = "UPDATE" in sql and '"lease"' in sql and connection.in_atomic_block
        if claim_written and not given_away:
            given_away.append(False)
        elif given_away == [False] and not connection.in_atomic_block:  # the claim has committed
            given_away[0] = True  # the reconciler took the lease back; another run claimed it
            McpTask.objects.filter(pk=task.pk).update(lease="another-run", attempts=2, heartbeat_at=timezone.now())
        return execute(sql, params, many, context)

    with connection.execute_wrapper(give_away_after_the_claim):
        outcome = jobs.runner.run_task(task.pk, lambda pk: None)
    assert given_away == [True]
    assert outcome in ("skipped", "lost")
    assert SEEN["runs"] == []
    row = McpTask.objects.get(pk=task.pk)
    assert (row.status, row.lease, row.attempts) == ("working", "another-run", 2)
    assert row.result is None and row.error is None


def _state(task_id: str) -> str:
    """What a failure needs to be read: the row and every thread's stack (a heartbeat blocked
    on a pooled connection or a lock shows here)."""
    row = McpTask.objects.filter(task_id=task_id).values("status", "lease", "heartbeat_at", "attempts").first()
    stacks = "\n".join(
        f"--- {thread_id}\n" + "".join(traceback.format_stack(frame))
        for thread_id, frame in sys._current_frames().items()
    )
    return f"row={row} seen={SEEN}\n{stacks}"


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# --- system checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "check_id"),
    [
        ({"TASKS_EXECUTOR": "cron"}, "mcp_oauth.E092"),
        ({"TASKS_TTL_MS": 0}, "mcp_oauth.E092"),
        ({"TASKS_HEARTBEAT_SECONDS": 10, "TASKS_LEASE_SECONDS": 15}, "mcp_oauth.E092"),
        ({"TASKS_RESULT_CIPHER": "json"}, "mcp_oauth.E093"),  # json has no encrypt()
        ({"TASKS_RESULT_CIPHER": "no.such.module"}, "mcp_oauth.E093"),
    ],
)
def test_task_settings_checks(settings, override, check_id):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **override}
    assert [e.id for e in check_tasks(None)] == [check_id]


def test_task_settings_check_passes_by_default():
    assert check_tasks(None) == []


def test_revoking_the_users_grant_cancels_their_tasks(client, token, user, public_app):
    task_id = start(client, token, "compute", {"seconds": 30, "label": "revoked"})["taskId"]
    assert _wait(lambda: McpTask.objects.get(task_id=task_id).lease != "")
    revoke_user_grants(user, public_app, reason="user_disconnected")
    assert _wait(lambda: McpTask.objects.get(task_id=task_id).status == "cancelled")
    assert SEEN["cancelled"] == [("revoked", True)]
    assert post(client, token, "tasks/get", {"taskId": task_id}).status_code == 401
