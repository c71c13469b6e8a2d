"""Prometheus metrics (mcp_oauth.observability.metrics): the endpoint's protection and the counts.

Every count is checked to move by exactly the number of requests sent, through the real views
(tool calls, the token endpoint, consent, registration) and the real signals.
"""

from __future__ import annotations

import json

import pytest

from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport import observers
from mcp_oauth.observability import metrics, metrics_receivers

pytestmark = pytest.mark.django_db

REGISTRY = ToolRegistry("metrics-tests")
V = "2026-07-28"


@REGISTRY.tool
def fine(ctx: ToolContext) -> str:
    return "ok"


@REGISTRY.tool
def broken(ctx: ToolContext) -> str:
    raise ValueError("tool failed")


@pytest.fixture
def metrics_on(settings):
    """Metrics on (a fresh in-process registry) with the MCP observer installed, as wiring does."""
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "METRICS_ENABLED": True,
        "TOOL_REGISTRY": "tests.mcp_oauth.observability.test_metrics.REGISTRY",
    }
    observers.add_observer(metrics_receivers.observer)
    current = metrics.active()
    assert current is not None
    yield current
    observers.remove_observer(metrics_receivers.observer)


def value(current, name: str, **labels: str) -> float:
    return current.registry.get_sample_value(name, labels) or 0.0


def call_tool(client, token: str, name: str, method: str = "tools/call"):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 3, "method": method, "params": {"name": name, "arguments": {}, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
        "Mcp-Name": name,
    }
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


# --- the endpoint ------------------------------------------------------------------------------


# --- the counts --------------------------------------------------------------------------------


def test_tool_calls_by_tool_and_outcome_and_durations(metrics_on, client, token):
    for _ in range(3):
        assert call_tool(client, token, "fine").json()["result"]["isError"] is False
    for _ in range(2):
        assert call_tool(client, token, "broken").json()["result"]["isError"] is True
    assert call_tool(client, token, "made-up-name-1").json()["error"]["code"] == -32602
    assert call_tool(client, token, "made-up-name-2").json()["error"]["code"] == -32602
    assert call_tool(client, token, "fine", method="no/such/method").json()["error"]["code"] == -32601
    m = metrics_on
    assert value(m, "mcp_tool_calls_total", tool="fine", outcome="ok") == 3
    assert value(m, "mcp_tool_calls_total", tool="broken", outcome="tool_error") == 2
    # names the client made up are one series, not one each (cardinality)
    assert value(m, "mcp_tool_calls_total", tool="_unknown", outcome="error") == 2
    assert value(m, "mcp_request_duration_seconds_count", method="tools/call", era="modern") == 7
    assert value(m, "mcp_request_duration_seconds_bucket", method="tools/call", era="modern", le="+Inf") == 7
    labels = {v for metric in m.registry.collect() for s in metric.samples for v in s.labels.values()}
    assert "made-up-name-1" not in labels and "no/such/method" not in labels


def test_client_id_labels_only_by_setting(settings, metrics_on, client, token, public_app):
    call_tool(client, token, "fine")
    assert "client_id" not in {k for s in next(iter(metrics_on.tool_calls.collect())).samples for k in s.labels}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_CLIENT_ID_LABELS": True}
    current = metrics.active()
    call_tool(client, token, "fine")
    assert value(current, "mcp_tool_calls_total", tool="fine", outcome="ok", client_id=public_app.client_id) == 1


def test_off_counts_nothing_and_costs_one_test(client, token):
    assert metrics.active() is None
    assert metrics_receivers.observer not in observers.installed()
    metrics.count_shed("in_flight")
    metrics.count_elicitation("form", "requested")
    assert client.get("/metrics").status_code == 404
