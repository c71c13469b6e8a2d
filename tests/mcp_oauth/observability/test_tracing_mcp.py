"""The MCP request's SERVER span (mcp_oauth.observability.tracing_mcp): one per call, parented by the client's traceparent (SDK client or params._meta), the MCP semantic conventions' attributes, content only when opted in, a refused scope."""

from __future__ import annotations

import asyncio
import json
import secrets

import pytest
from opentelemetry import trace

from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.models import McpSession
from mcp_oauth.observability import tracing_setup
from mcp_oauth.observability.tracing_mcp import DURATION_BUCKETS
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.mcp_oauth.observability.test_tracing import (  # noqa: F401 - fixtures and helpers
    PROTOCOL,
    live_site,
)
from tests.support.tracing_helpers import (  # noqa: F401 - otlp, traced: fixtures
    CALLS,
    HTTP_SPAN_ID,
    HTTP_TRACE_ID,
    by_id,
    call_echo_three_ways,
    otlp,
    server_spans,
    traced,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
def test_one_server_span_per_tool_call_parented_by_the_sdk_client(
    mode, live_site, traced, user, public_app, mint_token
):
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    with trace.get_tracer("tests").start_as_current_span(f"test {mode}") as root:
        seen = asyncio.run(call_echo_three_ways(live_site + "/mcp", token, mode))
    tracing_setup.flush()
    trace_id = format(root.get_span_context().trace_id, "032x")
    spans = traced.wait_for(lambda spans: len(server_spans(spans, trace_id, *CALLS)) == 3 and spans)
    calls = server_spans(spans, trace_id, *CALLS)
    clients = by_id([s for s in spans if s["kind"] == "CLIENT"])
    session = McpSession.objects.get() if mode == "legacy" else None

    expected_base = {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": PROTOCOL[mode],
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
    }
    if session is not None:
        expected_base["mcp.session.id"] = str(session.pk)
    outcomes = []
    assert [span["name"] for span in calls] == list(CALLS)
    for span in calls:
        client = clients[span["parent_span_id"]]  # the parent is the SDK client's span
        tool = span["attributes"]["gen_ai.tool.name"]
        assert client["name"] == "MCP send tools/call " + tool
        # a tool the server does not serve is not in the span's name (cardinality)
        assert span["name"] == ("tools/call" if tool == "no-such-tool" else "tools/call " + tool)
        assert client["trace_id"] == span["trace_id"] == trace_id
        assert span["scope"] == "mcp_oauth"
        assert span["resource"]["service.name"] == "mcp-oauth-tests"
        assert span["links"] == [(HTTP_TRACE_ID, HTTP_SPAN_ID)]  # the HTTP request's context
        expected = {
            **expected_base,
            "gen_ai.tool.name": tool,
            "jsonrpc.request.id": client["attributes"]["jsonrpc.request.id"],
        }
        extra = {k: v for k, v in span["attributes"].items() if k not in expected}
        assert {k: span["attributes"][k] for k in expected} == expected
        outcomes.append((extra, span["status"], span["status_message"]))
    assert outcomes == [
        ({}, "UNSET", ""),
        ({"error.type": "tool_error"}, "ERROR", ""),
        (
            {"error.type": "-32602", "rpc.response.status_code": "-32602"},
            "ERROR",
            seen["invalid_message"],
        ),
    ]
    assert seen["invalid_code"] == -32602

    histograms = traced.histograms
    operation = [
        h
        for h in histograms
        if h["name"] == "mcp.server.operation.duration"
        and h["attributes"].get("mcp.protocol.version") == PROTOCOL[mode]
        and h["attributes"].get("gen_ai.tool.name") in ("echo", "_OTHER")
    ]
    # the histograms are cumulative for the process: series of earlier tests may be there too
    assert {(h["attributes"]["gen_ai.tool.name"], h["attributes"].get("error.type")) for h in operation} >= {
        ("echo", None),
        ("echo", "tool_error"),
        ("_OTHER", "-32602"),  # a made-up name is not a series of its own
    }
    assert all(h["unit"] == "s" and h["bounds"] == [float(b) for b in DURATION_BUCKETS] for h in operation)
    assert not any("mcp.session.id" in h["attributes"] or "jsonrpc.request.id" in h["attributes"] for h in operation)
    if mode == "legacy":  # the SDK ends its session with DELETE: the session's duration
        sessions = [
            h
            for h in histograms
            if h["name"] == "mcp.server.session.duration" and h["attributes"]["mcp.protocol.version"] == "2025-11-25"
        ]
        assert sessions and sessions[-1]["count"] >= 1
        assert sessions[-1]["bounds"] == [float(b) for b in DURATION_BUCKETS]


def test_opt_in_content_records_arguments_and_result(live_site, traced, settings, user, public_app, mint_token):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRACING_CAPTURE_CONTENT": True}
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    with trace.get_tracer("tests").start_as_current_span("test content") as root:
        asyncio.run(call_echo_three_ways(live_site + "/mcp", token, "legacy"))
    tracing_setup.flush()
    trace_id = format(root.get_span_context().trace_id, "032x")
    spans = traced.wait_for(lambda spans: len(server_spans(spans, trace_id, *CALLS)) == 3 and spans)
    ok, failed, invalid = (s["attributes"] for s in server_spans(spans, trace_id, *CALLS))
    assert ok["gen_ai.tool.call.arguments"] == '{"text":"hi"}'
    assert '"hi"' in ok["gen_ai.tool.call.result"]
    assert failed["gen_ai.tool.call.arguments"] == '{"text":""}'
    assert "gen_ai.tool.call.result" not in failed  # only a successful execution's result
    assert invalid["gen_ai.tool.call.arguments"] == "{}"


def test_content_is_not_recorded_by_default(live_site, traced, user, public_app, mint_token):
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    with trace.get_tracer("tests").start_as_current_span("test no content") as root:
        asyncio.run(call_echo_three_ways(live_site + "/mcp", token, "auto"))
    tracing_setup.flush()
    trace_id = format(root.get_span_context().trace_id, "032x")
    spans = traced.wait_for(lambda spans: len(server_spans(spans, trace_id, *CALLS)) == 3 and spans)
    for span in server_spans(spans, trace_id, *CALLS):
        assert not any(key.startswith("gen_ai.tool.call.") for key in span["attributes"])


SCOPED = ToolRegistry("tracing-tests")


@SCOPED.tool(scopes=["files:write"])
def write_file(ctx: ToolContext) -> str:
    return "written"


def test_a_refused_scope_and_a_meta_traceparent_sent_by_hand(
    client, traced, settings, resource, user, public_app, mint_token
):
    """The parent comes from ``params._meta`` whatever client sent it; a step-up refusal (403) is
    ``error.type=insufficient_scope``."""
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.observability.test_tracing_mcp.SCOPED",
    }
    token = mint_token(user, public_app, "mcp", resource.uri)
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        "traceparent": f"00-{trace_id}-{parent_id}-01",
        "tracestate": "vendor=abc",
    }
    message = {"jsonrpc": "2.0", "id": "req-9", "method": "tools/call", "params": {"name": "write_file", "_meta": meta}}
    response = client.post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "write_file",
        },
    )
    assert response.status_code == 403
    tracing_setup.flush()
    (span,) = traced.wait_for(lambda spans: [s for s in spans if s["trace_id"] == trace_id])
    assert (span["name"], span["parent_span_id"], span["links"], span["status"]) == (
        "tools/call write_file",
        parent_id,
        [],
        "ERROR",
    )
    assert span["attributes"] == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2026-07-28",
        "gen_ai.tool.name": "write_file",
        "gen_ai.operation.name": "execute_tool",
        "jsonrpc.request.id": "req-9",
        "error.type": "insufficient_scope",
    }


def test_request_shapes_are_kept_only_for_known_names_and_are_never_changed():
    """The span name, attributes and histogram attributes built once per method, version and
    known target: a name the server does not know is never kept (a client's made-up names cannot
    grow the cache), a long name is keyed by its first MAX_TARGET_LENGTH characters, and the
    shared dicts are copied, never changed, by the observer."""
    from mcp_oauth.observability import tracing_mcp

    tracing_mcp._shapes.clear()
    known = tracing_mcp._shape("tools/call", "2026-07-28", "gen_ai.tool.name", "echo", True)
    assert known.name == "tools/call echo"
    assert known.attributes == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2026-07-28",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
    }
    assert known.metric_attributes == known.attributes
    assert tracing_mcp._shape("tools/call", "2026-07-28", "gen_ai.tool.name", "echo", True) is known

    made_up = tracing_mcp._shape("tools/call", "2026-07-28", "gen_ai.tool.name", "nope\x00", False)
    assert made_up.name == "tools/call"
    assert made_up.attributes["gen_ai.tool.name"] == "nope\ufffd"
    assert made_up.metric_attributes["gen_ai.tool.name"] == tracing_mcp.OTHER
    assert list(tracing_mcp._shapes) == [("tools/call", "2026-07-28", "echo")]

    long_name = "p" * (tracing_mcp.MAX_TARGET_LENGTH + 50)
    prompt = tracing_mcp._shape("prompts/get", "2025-11-25", "gen_ai.prompt.name", long_name, True)
    assert prompt.name == "prompts/get " + "p" * tracing_mcp.MAX_TARGET_LENGTH
    assert ("prompts/get", "2025-11-25", "p" * tracing_mcp.MAX_TARGET_LENGTH) in tracing_mcp._shapes
    assert len(tracing_mcp._shapes) == 2
    tracing_mcp._shapes.clear()
