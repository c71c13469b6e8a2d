"""The observer hook around every MCP request (mcp_oauth.mcp_server.transport.observers).

Tracing, metrics and the tool-call audit trail are observers: each gets ``start(call)`` before the
handler and ``finish(token, event)`` after it, with the outcome the client saw.
"""

from __future__ import annotations

import json

import pytest

from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport import observers

pytestmark = pytest.mark.django_db

REGISTRY = ToolRegistry("observer-tests")
V = "2026-07-28"


@REGISTRY.tool
def fine(ctx: ToolContext, word: str = "hi") -> str:
    return word


@REGISTRY.tool
def broken(ctx: ToolContext) -> str:
    raise ValueError("tool failed")


class Recorder:
    def __init__(self) -> None:
        self.started: list = []
        self.events: list = []

    def start(self, call):
        self.started.append(call.method)
        return len(self.started)

    def finish(self, token, event):
        self.events.append((token, event))


class Exploding:
    def start(self, call):
        raise RuntimeError("observer bug")

    def finish(self, token, event):
        raise RuntimeError("observer bug")


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.transport.test_observers.REGISTRY",
    }


@pytest.fixture
def recorder():
    rec = Recorder()
    observers.add_observer(rec)
    yield rec
    observers.remove_observer(rec)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def _call(client, token, method, params, name=None):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
    }
    if name:
        headers["Mcp-Name"] = name
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)


def test_a_tool_call_is_observed_with_its_target_and_outcome(client, token, recorder):
    response = _call(client, token, "tools/call", {"name": "fine", "arguments": {"word": "yo"}}, name="fine")
    assert response.status_code == 200
    assert recorder.started == ["tools/call"]
    [(tok, event)] = recorder.events
    assert tok == 1
    assert (event.call.method, event.target, event.outcome, event.error_code, event.status) == (
        "tools/call",
        "fine",
        "ok",
        None,
        200,
    )
    assert event.call.era == "modern"
    assert event.duration >= 0 and event.started_at > 1.7e9
    assert event.message["id"] == 7


def test_a_tool_error_and_a_json_rpc_error_are_told_apart(client, token, recorder):
    _call(client, token, "tools/call", {"name": "broken", "arguments": {}}, name="broken")
    _call(client, token, "tools/call", {"name": "nope", "arguments": {}}, name="nope")
    outcomes = [(e.target, e.outcome, e.error_code) for _, e in recorder.events]
    assert outcomes[0] == ("broken", "tool_error", None)
    assert outcomes[1][0:2] == ("nope", "error")
    assert outcomes[1][2] == -32602


def test_a_failing_observer_never_fails_the_request(client, token, recorder):
    bad = Exploding()
    observers.add_observer(bad)
    try:
        response = _call(client, token, "tools/call", {"name": "fine", "arguments": {}}, name="fine")
    finally:
        observers.remove_observer(bad)
    assert response.status_code == 200
    assert response.json()["result"]["content"][0]["text"] == "hi"
    assert [e.outcome for _, e in recorder.events] == ["ok"]


def test_add_is_idempotent_and_remove_tolerates_strangers():
    rec = Recorder()
    observers.add_observer(rec)
    observers.add_observer(rec)
    assert observers.installed().count(rec) == 1
    observers.remove_observer(rec)
    observers.remove_observer(rec)
    assert rec not in observers.installed()
