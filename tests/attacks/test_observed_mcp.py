"""Hostile input to /mcp in both eras with every observer on (tracing to a real OTLP receiver,
Prometheus metrics, the audit trail): each answer is the spec's error, never a 500, and no
observer fails on it (an observer's exception is logged, and would lose its record)."""

from __future__ import annotations

import json
import logging

import pytest

from mcp_oauth.mcp_server.transport import observers
from mcp_oauth.observability import metrics, metrics_receivers
from mcp_oauth.observability.audit_trail import writer
from tests.support.tracing_helpers import otlp, traced  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def observed(traced, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "METRICS_ENABLED": True,
        "TOOL_CALL_AUDIT_ARGUMENTS": True,
        "TRACING_CAPTURE_CONTENT": True,
        "TOOL_REGISTRY": "tests.mcp_oauth.observability.test_audit_trail.REGISTRY",
    }
    observers.add_observer(metrics_receivers.observer)
    assert metrics.active() is not None
    yield
    observers.remove_observer(metrics_receivers.observer)
    writer.flush()


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


def deep(depth):
    value: object = "x"
    for _ in range(depth):
        value = {"a": [value]}
    return value


def modern_meta():
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }


#: (params of a tools/call, or a raw body)
HOSTILE_PARAMS = [
    {"name": 123},
    {"name": None},
    {"name": "echo", "arguments": "text"},
    {"name": "echo", "arguments": [1, 2]},
    {"name": "echo", "arguments": None},
    {"name": "echo", "arguments": {"word": deep(400)}},
    {"name": "echo", "arguments": {"word": 1e308, "api_token": -0.0}},
    {"name": "echo", "arguments": {"word": "x" * 1_000_000}},
    {"name": "echo", "arguments": {str(n): n for n in range(5000)}},
    {"name": "echo", "arguments": {"word": "\ud83d"}},
    {"name": "echo", "arguments": {"word": "\x00"}},
    {"name": "echo", "_meta": {"traceparent": {"nested": True}, "tracestate": 5}},
    {"name": "echo", "_meta": "not-an-object"},
    {"name": "echo", "task": {"ttl": -1}},
]
RAW_BODIES = [
    b"",
    b"{",
    b"[]",
    b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": "x"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}',
    b'{"jsonrpc": "2.0", "id": NaN, "method": "tools/call", "params": {"name": "echo"}}',
    b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/call", "params": {"name": "echo"}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"word": 1e999}}}',
    b"\xff\xfe{}",
    b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": 5}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}' + b" " * 10 + b"x",
]


def post(client, body, headers):
    return client.post("/mcp", body, content_type="application/json", headers=headers)


def modern_headers(token, name="echo"):
    return {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        **({"Mcp-Name": name} if isinstance(name, str) else {}),
    }


def legacy_headers(client, token):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT}
    response = post(client, json.dumps(init), headers)
    assert response.status_code == 200, response.content
    return {**headers, "Mcp-Session-Id": response["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY}


def assert_spec_error(response):
    assert response.status_code < 500, response.content[:300]
    if response.status_code in (200, 400, 404) and response["Content-Type"].startswith("application/json"):
        message = response.json()
        if "error" in message:
            assert isinstance(message["error"]["code"], int) and message["error"]["code"] < 0


def observer_failures(caplog):
    return [r.getMessage() for r in caplog.records if "observer" in r.getMessage() and r.levelno >= logging.ERROR]


@pytest.mark.parametrize("params", HOSTILE_PARAMS)
@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_hostile_params_are_spec_errors_and_no_observer_fails(client, observed, token, caplog, era, params):
    params = dict(params)
    if era == "modern":
        if not isinstance(params.get("_meta"), (dict, str)):
            params["_meta"] = modern_meta()
        elif isinstance(params["_meta"], dict):
            params["_meta"] = {**modern_meta(), **params["_meta"]}
        headers = modern_headers(token, params.get("name"))
    else:
        headers = legacy_headers(client, token)
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
    caplog.set_level(logging.INFO)
    failed = writer.failed  # a process-wide count: earlier tests may have had batches refused
    assert_spec_error(post(client, body, headers))
    assert writer.flush()
    assert observer_failures(caplog) == []
    assert writer.failed == failed


@pytest.mark.parametrize("body", RAW_BODIES)
@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_hostile_bodies_are_spec_errors_and_no_observer_fails(client, observed, token, caplog, era, body):
    headers = modern_headers(token) if era == "modern" else legacy_headers(client, token)
    caplog.set_level(logging.INFO)
    assert_spec_error(post(client, body, headers))
    assert writer.flush()
    assert observer_failures(caplog) == []
