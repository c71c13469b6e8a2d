"""The task rows (mcp_oauth.mcp_server.mcp_tasks.store): sealed results, inputResponses through tasks/update, cancellation of a finished task, the owner-bound lookup, expiry."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_oauth.mcp_server.mcp_tasks import jobs
from mcp_oauth.mcp_server.tools import InputRequest, ToolContext
from mcp_oauth.models import McpTask
from mcp_oauth.signals import task_finished
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import (  # noqa: F401 - fixtures
    REGISTRY,
    SEEN,
    TASK_CAPS,
    V,
    _settings,
    _wait,
    client,
    compute,
    error,
    poll,
    post,
    result,
    start,
    token,
)

pytestmark = pytest.mark.django_db(transaction=True)


CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}


@REGISTRY.tool(task="optional")
async def confirm(ctx: ToolContext, filename: str) -> str:
    answers = await ctx.request_inputs(
        {"a": InputRequest.elicit("A?", CONFIRM), "b": InputRequest.elicit(f"Delete {filename}?", CONFIRM)}
    )
    return "yes" if all(answers[k]["content"]["confirm"] for k in ("a", "b")) else "no"


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


def test_expired_task_is_32602_then_deleted(client, token):
    task_id = poll(client, token, start(client, token, "compute", {"label": "old"})["taskId"])["taskId"]
    McpTask.objects.filter(task_id=task_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert error(post(client, token, "tasks/get", {"taskId": task_id})) == {
        "code": -32602,
        "message": "Failed to retrieve task: Task has expired",
    }
    assert jobs.reconcile()["expired"] == 1
    assert error(post(client, token, "tasks/get", {"taskId": task_id}))["message"].endswith("Task not found")
