"""The MCP Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) through the endpoint, in-process.

Tasks run on the thread executor of this process (the embedded default) against the real test
database; the Celery-worker and kill tests are in tests/topology/test_mcp_tasks_workers.py.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from cryptography.fernet import Fernet
from django.test import AsyncClient, Client
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.grants import revoke_user_grants
from mcp_oauth.checks import check_tasks
from mcp_oauth.mcp_server.mcp_tasks import TaskPolicy, jobs
from mcp_oauth.mcp_server.mcp_tasks.store import EXTENSION
from mcp_oauth.mcp_server.tools import InputRequest, McpError, ToolContext, ToolError, ToolRegistry
from mcp_oauth.models import McpTask
from mcp_oauth.signals import task_created, task_finished

pytestmark = pytest.mark.django_db(transaction=True)

REGISTRY = ToolRegistry("mcp-tasks-tests")
V = "2026-07-28"
TASK_CAPS = {"elicitation": {"form": {}}, "extensions": {EXTENSION: {}}}
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
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
    return {"secret": "s3cr3t"}


@REGISTRY.tool(task="optional")
async def confirm(ctx: ToolContext, filename: str) -> str:
    answers = await ctx.request_inputs(
        {"a": InputRequest.elicit("A?", CONFIRM), "b": InputRequest.elicit(f"Delete {filename}?", CONFIRM)}
    )
    return "yes" if all(answers[k]["content"]["confirm"] for k in ("a", "b")) else "no"


@REGISTRY.tool(task="never")
def plain() -> str:
    return "plain"


@REGISTRY.tool(task=TaskPolicy("optional", max_retries=1))
async def blocking(ctx: ToolContext, seconds: float = 1.0) -> str:
    SEEN["runs"].append(("blocking", ctx.task.attempt, ctx.task.idempotency_key))
    await ctx.task.set_status_message("blocking the loop")
    time.sleep(seconds)
    return f"unblocked on attempt {ctx.task.attempt}"


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


# --- negotiation ----------------------------------------------------------------------------


def test_server_discover_offers_the_extension_and_initialize_does_not(client, token):
    discovered = result(post(client, token, "server/discover", {}))
    assert discovered["capabilities"]["extensions"][EXTENSION] == {}
    assert "tasks" not in discovered["capabilities"]
    legacy = client.post(
        "/mcp",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"extensions": {EXTENSION: {}}},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        ),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
    )
    capabilities = legacy.json()["result"]["capabilities"]
    assert EXTENSION not in (capabilities.get("extensions") or {})
    assert "tasks" not in capabilities


def test_optional_tool_without_the_extension_runs_inline(client, token):
    got = start(client, token, "compute", {"label": "inline"}, caps={})
    assert got["resultType"] == "complete"
    assert got["content"] == [{"type": "text", "text": "done inline"}]
    assert not McpTask.objects.exists()


def test_always_tool_without_the_extension_is_32021(client, token):
    response = post(client, token, "tools/call", {"name": "tool_error", "arguments": {}}, caps={})
    assert error(response) == {
        "code": -32021,
        "message": f"Missing required client capability: this tool runs as a task ({EXTENSION})",
        "data": {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    }
    assert not McpTask.objects.exists()


def test_never_tool_with_the_extension_is_a_plain_result(client, token):
    assert start(client, token, "plain")["content"] == [{"type": "text", "text": "plain"}]


def test_a_2025_11_25_session_runs_even_an_always_tool_inline_and_has_no_task_methods(client, token):
    h = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"extensions": {EXTENSION: {}}},
        "clientInfo": {"name": "t", "version": "1"},
    }
    opened = client.post(
        "/mcp",
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}),
        content_type="application/json",
        headers=h,
    )
    h["Mcp-Session-Id"] = opened["Mcp-Session-Id"]
    h["MCP-Protocol-Version"] = "2025-11-25"

    def send(method, params):
        message = {"jsonrpc": "2.0", "id": 2, "method": method, "params": params}
        response = client.post("/mcp", json.dumps(message), content_type="application/json", headers=h)
        return response.json()

    called = send("tools/call", {"name": "tool_error", "arguments": {}})
    assert called["result"] == {"content": [{"type": "text", "text": "no luck"}], "isError": True}
    assert send("tasks/get", {"taskId": "x"})["error"]["code"] == -32601
    assert not McpTask.objects.exists()


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_task_methods_need_the_extension(client, token, method):
    params = {"taskId": "x", "inputResponses": {}} if method == "tasks/update" else {"taskId": "x"}
    response = post(client, token, method, params, caps={})
    assert response.status_code == 400
    assert error(response)["code"] == -32021
    assert error(response)["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


def test_mcp_name_must_mirror_the_task_id(client, token):
    response = post(client, token, "tasks/get", {"taskId": "abc"}, name="other")
    assert response.status_code == 400
    assert error(response)["code"] == -32020


@pytest.mark.parametrize("method", ["tasks/result", "tasks/list"])
def test_removed_v1_methods_are_32601(client, token, method):
    assert error(post(client, token, method, {"taskId": "x"}))["code"] == -32601


# --- lifecycle ------------------------------------------------------------------------------


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


def test_encrypted_result_is_sealed_at_rest(client, token):
    done = poll(client, token, start(client, token, "secret_result")["taskId"])
    assert done["result"]["structuredContent"] == {"secret": "s3cr3t"}
    row = McpTask.objects.get(task_id=done["taskId"])
    assert row.result is None and row.sealed_result and "s3cr3t" not in row.sealed_result


def test_input_required_answered_through_tasks_update_partially(client, token):
    task_id = start(client, token, "confirm", {"filename": "f.txt"})["taskId"]
    asked = poll(client, token, task_id, until=("input_required",))
    assert asked["status"] == "input_required"
    assert set(asked["inputRequests"]) == {"a", "b"}
    assert asked["inputRequests"]["b"]["method"] == "elicitation/create"
    assert asked["inputRequests"]["b"]["params"]["message"] == "Delete f.txt?"
    ack = result(
        post(
            client,
            token,
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    "a": {"action": "accept", "content": {"confirm": True}},
                    "never-issued": {"action": "accept"},
                },
            },
        )
    )
    assert set(ack) == {"resultType", "_meta"} and ack["resultType"] == "complete"
    partial = result(post(client, token, "tasks/get", {"taskId": task_id}))
    assert partial["status"] == "input_required" and set(partial["inputRequests"]) == {"b"}
    # an invalid answer: asked again under a key never used before (keys are unique per task)
    result(
        post(
            client,
            token,
            "tasks/update",
            {"taskId": task_id, "inputResponses": {"b": {"action": "accept", "content": {"confirm": "not a boolean"}}}},
        )
    )
    again = poll(client, token, task_id, until=("input_required", "completed"))
    again = poll(client, token, task_id, until=("input_required",)) if again["status"] != "input_required" else again
    assert set(again["inputRequests"]) == {"b~2"}
    result(
        post(
            client,
            token,
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    "b": {"action": "accept", "content": {"confirm": True}},  # already answered: ignored
                    "b~2": {"action": "accept", "content": {"confirm": True}},
                },
            },
        )
    )
    done = poll(client, token, task_id)
    assert done["status"] == "completed"
    assert done["result"]["content"] == [{"type": "text", "text": "yes"}]


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


def test_cancel_of_a_finished_task_is_acknowledged_and_changes_nothing(client, token):
    """SEP-2663 "Task Cancellation": the server MUST acknowledge with an empty result; the task MAY
    reach "a terminal status other than cancelled if the work finished before cancellation could
    take effect"; a JSON-RPC error only for an unknown task. A finished task stays as it finished:
    its result, its ``lastUpdatedAt``, no second ``task_finished``."""
    finished: list[str] = []

    def receiver(sender, task, **kwargs):
        finished.append(task.status)

    task_id = start(client, token, "compute", {"label": "quick"})["taskId"]
    task_finished.connect(receiver, dispatch_uid="test-cancel-finished")
    try:
        done = poll(client, token, task_id)
        assert done["status"] == "completed"
        assert _wait(lambda: finished == ["completed"])
        ack = result(post(client, token, "tasks/cancel", {"taskId": task_id}))
        after = result(post(client, token, "tasks/get", {"taskId": task_id}))
    finally:
        task_finished.disconnect(dispatch_uid="test-cancel-finished")
    assert set(ack) - {"_meta"} == {"resultType"} and ack["resultType"] == "complete"
    assert after["status"] == "completed" and after["result"] == done["result"]
    assert after["lastUpdatedAt"] == done["lastUpdatedAt"]
    assert McpTask.objects.get(task_id=task_id).cancel_requested_at is None
    assert finished == ["completed"]
    unknown = post(client, token, "tasks/cancel", {"taskId": "no-such-task"})
    assert error(unknown) == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


@pytest.mark.parametrize("answer", ["yes", 1, None, ["accept"], True])
def test_a_non_object_answer_in_tasks_update_is_32602_and_records_nothing(client, token, answer):
    """``inputResponses`` maps keys to ``InputResponse`` objects (an ``ElicitResult``,
    ``CreateMessageResult`` or ``ListRootsResult``: SEP-2663 "Task Update Requests", MRTR): an
    outstanding key answered with something else is an invalid request (-32602, nothing kept,
    the task still waits); a key not outstanding is ignored whatever its value."""
    task_id = start(client, token, "confirm", {"filename": "x.txt"})["taskId"]
    asked = poll(client, token, task_id, until=("input_required",))
    assert set(asked["inputRequests"]) == {"a", "b"}
    refused = post(
        client,
        token,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"a": answer, "b": {"action": "accept", "content": {"confirm": True}}}},
    )
    assert refused.status_code == 400
    assert error(refused) == {
        "code": -32602,
        "message": "Invalid params: inputResponses['a'] must be an object (the answer to the input request)",
    }
    still = result(post(client, token, "tasks/get", {"taskId": task_id}))
    assert still["status"] == "input_required" and set(still["inputRequests"]) == {"a", "b"}
    row = McpTask.objects.get(task_id=task_id)
    assert (row.input_state or {}).get("responses") in (None, {})
    # a garbage value under a key that is not outstanding is ignored (SHOULD ignore), the rest taken
    ack = result(
        post(
            client,
            token,
            "tasks/update",
            {
                "taskId": task_id,
                "inputResponses": {
                    "never-issued": answer,
                    "a": {"action": "accept", "content": {"confirm": True}},
                    "b": {"action": "accept", "content": {"confirm": True}},
                },
            },
        )
    )
    assert ack["resultType"] == "complete"
    done = poll(client, token, task_id)
    assert done["status"] == "completed" and done["result"]["content"] == [{"type": "text", "text": "yes"}]


@pytest.mark.parametrize("text", ["\x00", "\ud800", "ok\x00"])
def test_an_answer_with_unstorable_text_in_tasks_update_is_32602_not_a_500(client, token, text):
    """Attack: an ``InputResponse`` object holding a NUL or an unpaired surrogate (valid JSON
    escapes) reached the task's JSON column; PostgreSQL's jsonb refuses both (a 500). It is an
    invalid answer: -32602, nothing recorded, the task still waits."""
    task_id = start(client, token, "confirm", {"filename": "x.txt"})["taskId"]
    poll(client, token, task_id, until=("input_required",))
    for answer in (
        {"action": "accept", "content": {"confirm": True, "note": text}},
        {"action": "accept", "content": {"confirm": True, text: 1}},
    ):
        refused = post(client, token, "tasks/update", {"taskId": task_id, "inputResponses": {"a": answer}})
        assert refused.status_code == 400, refused.content[:300]
        assert error(refused)["code"] == -32602
    still = result(post(client, token, "tasks/get", {"taskId": task_id}))
    assert still["status"] == "input_required" and set(still["inputRequests"]) == {"a", "b"}


def test_a_task_cancelled_before_it_started_never_starts(client, token, resource, user, public_app):
    task = McpTask.objects.create(
        tool_name="compute",
        arguments={"label": "never"},
        user=user,
        application=public_app,
        resource=resource,
        scopes="mcp",
        protocol_version=V,
        client_capabilities=TASK_CAPS,
        queued_at=timezone.now(),
    )
    assert result(post(client, token, "tasks/cancel", {"taskId": task.task_id}))["resultType"] == "complete"
    assert jobs.runner.run_task(task.pk, jobs.dispatch) == "skipped"
    task.refresh_from_db()
    assert task.status == "cancelled" and task.started_at is None
    assert SEEN["runs"] == []


# --- security -------------------------------------------------------------------------------


def test_another_user_or_client_gets_the_unknown_task_answer(
    client, token, resource, other_user, user, public_app, mint_token
):
    task_id = poll(client, token, start(client, token, "compute", {"label": "mine"})["taskId"])["taskId"]
    unknown = error(post(client, token, "tasks/get", {"taskId": "no-such-task"}))
    assert unknown == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    other_client = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    for intruder in (
        mint_token(other_user, public_app, resource=resource.uri),
        mint_token(user, other_client, resource=resource.uri),
    ):
        for method, params in (
            ("tasks/get", {"taskId": task_id}),
            ("tasks/update", {"taskId": task_id, "inputResponses": {}}),
            ("tasks/cancel", {"taskId": task_id}),
        ):
            response = post(client, intruder, method, params)
            assert response.status_code == 400
            assert error(response) == unknown
    assert McpTask.objects.get(task_id=task_id).status == "completed"


def test_revoked_token_is_refused(client, token):
    task_id = start(client, token, "compute", {"label": "r"})["taskId"]
    get_access_token_model().objects.all().delete()
    assert post(client, token, "tasks/get", {"taskId": task_id}).status_code == 401


def test_expired_task_is_32602_then_deleted(client, token):
    task_id = poll(client, token, start(client, token, "compute", {"label": "old"})["taskId"])["taskId"]
    McpTask.objects.filter(task_id=task_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert error(post(client, token, "tasks/get", {"taskId": task_id})) == {
        "code": -32602,
        "message": "Failed to retrieve task: Task has expired",
    }
    assert jobs.reconcile()["expired"] == 1
    assert error(post(client, token, "tasks/get", {"taskId": task_id}))["message"].endswith("Task not found")


# --- reconciler -----------------------------------------------------------------------------


@pytest.mark.parametrize(("max_retries", "expected"), [(1, "retried"), (0, "failed")])
def test_a_lost_worker_is_retried_or_failed_per_policy(max_retries, expected, resource, user, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TASKS_EXECUTOR": "thread", "TASKS_LEASE_SECONDS": 1}
    stale = timezone.now() - timedelta(seconds=5)
    task = McpTask.objects.create(
        tool_name="compute",
        arguments={"label": "lost"},
        user=user,
        application=public_app,
        resource=resource,
        scopes="mcp",
        protocol_version=V,
        client_capabilities=TASK_CAPS,
        lease="dead-worker",
        heartbeat_at=stale,
        attempts=1,
        max_retries=max_retries,
        started_at=stale,
    )
    assert jobs.reconcile()[expected] == 1
    if expected == "failed":
        task.refresh_from_db()
        assert task.status == "failed"
        assert task.error == {"code": -32603, "message": "The worker running the task was lost"}
    else:
        assert _wait(lambda: McpTask.objects.get(pk=task.pk).status == "completed")
        task.refresh_from_db()
        assert task.attempts == 2 and task.result["content"][0]["text"] == "done lost"


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


def test_a_run_that_lost_its_lease_is_cancelled_and_fenced(client, token):
    """The reconciler gave the task to another run (here: the lease is replaced): the old run is
    told (``lease_lost``, ``cancelled``), cancelled, and neither its status message nor its outcome is
    written over the new holder's."""
    task_id = start(client, token, "fenced")["taskId"]
    assert _wait(lambda: McpTask.objects.get(task_id=task_id).lease != "")
    McpTask.objects.filter(task_id=task_id).update(lease="another-run", status_message="the other run's message")
    assert _wait(lambda: SEEN["cancelled"] != [])
    assert SEEN["cancelled"] == [("fenced", True, True, False)]
    time.sleep(0.3)  # the old run's _store has returned by now
    row = McpTask.objects.get(task_id=task_id)
    assert (row.status, row.lease, row.status_message) == ("working", "another-run", "the other run's message")
    assert row.result is None and row.error is None


def test_the_idempotency_key_is_stable_per_task_and_differs_between_tasks():
    from mcp_oauth.mcp_server.mcp_tasks.runner import TaskHandle

    first, retry, other = (
        TaskHandle(1, "task-a", "l1", 1),
        TaskHandle(1, "task-a", "l2", 2),
        TaskHandle(2, "task-b", "l3"),
    )
    assert first.idempotency_key == retry.idempotency_key != other.idempotency_key
    assert len(first.idempotency_key) == 64 and "task-a" not in first.idempotency_key


def _wait(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# --- notifications/tasks on subscriptions/listen ----------------------------------------------


def _listen(token, task_ids, caps=TASK_CAPS, until=1):
    async def go():
        message = {
            "jsonrpc": "2.0",
            "id": "listen-t",
            "method": "subscriptions/listen",
            "params": {
                "notifications": {"taskIds": task_ids},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": V,
                    "io.modelcontextprotocol/clientCapabilities": caps,
                },
            },
        }
        h = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": V,
            "Mcp-Method": "subscriptions/listen",
        }
        response = await AsyncClient().post("/mcp", json.dumps(message), content_type="application/json", headers=h)
        if response["Content-Type"] == "application/json":
            return response.status_code, [json.loads(response.content)]
        stream = response.streaming_content.__aiter__()
        buffer, events = b"", []
        while True:
            events = _sse(buffer)
            if len(events) > until or (events and events[-1].get("params", {}).get("status") == "completed"):
                break
            buffer += await asyncio.wait_for(stream.__anext__(), 10)
        await stream.aclose()
        return response.status_code, events

    return async_to_sync(go)()


def _sse(raw: bytes) -> list[dict]:
    events = []
    for block in raw.decode().split("\n\n"):
        data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("".join(data)))
    return events


def test_listen_sends_notifications_tasks_until_terminal_for_own_tasks_only(
    client, token, resource, other_user, public_app, mint_token
):
    mine = start(client, token, "compute", {"seconds": 0.5, "label": "watched"})["taskId"]
    theirs = start(client, mint_token(other_user, public_app, resource=resource.uri), "compute", {})["taskId"]
    status, events = _listen(token, [mine, theirs, "unknown"], until=5)
    assert status == 200
    assert events[0]["method"] == "notifications/subscriptions/acknowledged"
    assert events[0]["params"]["notifications"] == {"taskIds": [mine]}
    notes = [e for e in events[1:] if e["method"] == "notifications/tasks"]
    assert notes and all(n["params"]["taskId"] == mine for n in notes)
    final = notes[-1]["params"]
    assert final["status"] == "completed"
    assert final["result"]["content"] == [{"type": "text", "text": "done watched"}]
    assert final["_meta"] == {"io.modelcontextprotocol/subscriptionId": "listen-t"}
    expected = result(post(client, token, "tasks/get", {"taskId": mine}))
    assert {k: v for k, v in final.items() if k != "_meta"} == {
        k: v for k, v in expected.items() if k not in ("_meta", "resultType")
    }


def test_listen_for_tasks_without_the_extension_is_32021(token):
    status, messages = _listen(token, ["x"], caps={})
    assert status == 400
    assert messages[0]["error"]["code"] == -32021
    assert messages[0]["error"]["data"] == {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}


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
