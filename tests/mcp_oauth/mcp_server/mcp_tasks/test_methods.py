"""The Tasks extension's JSON-RPC surface (mcp_oauth.mcp_server.mcp_tasks.methods): offered in server/discover only, tasks/* need the extension and a matching Mcp-Name, removed v1 methods, revoked tokens."""

from __future__ import annotations

import json

import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.mcp_server.mcp_tasks.store import EXTENSION
from mcp_oauth.models import McpTask
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
    tool_error,
)

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_revoked_token_is_refused(client, token):
    task_id = start(client, token, "compute", {"label": "r"})["taskId"]
    get_access_token_model().objects.all().delete()
    assert post(client, token, "tasks/get", {"taskId": task_id}).status_code == 401
