"""notifications/tasks on subscriptions/listen (mcp_oauth.mcp_server.mcp_tasks.listen): own tasks only, until terminal; -32021 without the extension."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

from mcp_oauth.mcp_server.mcp_tasks.store import EXTENSION
from tests.mcp_oauth.mcp_server.mcp_tasks.test_runner import (  # noqa: F401 - fixtures
    REGISTRY,
    SEEN,
    TASK_CAPS,
    V,
    _settings,
    client,
    compute,
    error,
    post,
    result,
    start,
    token,
)

pytestmark = pytest.mark.django_db(transaction=True)


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
