"""Attacks on the MCP spans (mcp_oauth.observability.tracing_mcp), exported to a real OTLP/HTTP
receiver: the tool name a client sends becomes the span name, so it must never be text the
exporter cannot encode (one such span loses the whole batch of everyone's spans); a hostile
``params._meta`` trace context is ignored, never an error; no bearer token is in any span."""

from __future__ import annotations

import json
import secrets

import pytest

from mcp_oauth.observability import tracing_setup
from tests.support.tracing_helpers import otlp, traced  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)

V = "2026-07-28"


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


def post(client, token, name, meta_extra=None, message_id="m1", raw_meta=None):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
        **(meta_extra or {}),
    }
    message = {"jsonrpc": "2.0", "id": message_id, "method": "tools/call", "params": {"name": name, "_meta": meta}}
    body = json.dumps(message)
    if raw_meta is not None:
        body = body.replace('"_meta": {', '"_meta": {' + raw_meta + ", ", 1)
    return client.post(
        "/mcp",
        body,
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": V,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,  # as is (the test client puts it in META; over HTTP: the =?base64?…?= form)
        },
    )


def traceparent():
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


@pytest.mark.parametrize("hostile", ["ev\ud800il", "\udfff", "ev\x00il"])
def test_a_tool_name_the_exporter_cannot_encode_loses_no_span(client, traced, token, hostile):
    good_trace, good_parent = traceparent()
    bad_trace, bad_parent = traceparent()
    post(client, token, "made-up", {"traceparent": good_parent}, "good-1")
    answer = post(client, token, hostile, {"traceparent": bad_parent}, "bad")
    assert answer.status_code in (200, 400)
    assert answer.json()["error"]["code"] == -32602
    post(client, token, "made-up", {"traceparent": good_parent}, "good-2")
    tracing_setup.flush()
    spans = traced.wait_for(
        lambda all_spans: (
            found if len(found := [s for s in all_spans if s["trace_id"] in (good_trace, bad_trace)]) >= 3 else None
        )
    )
    good = [s for s in spans if s["trace_id"] == good_trace]
    assert sorted(s["attributes"]["jsonrpc.request.id"] for s in good) == ["good-1", "good-2"]
    (bad,) = [s for s in spans if s["trace_id"] == bad_trace]
    assert bad["name"] == "tools/call"  # a tool the server lacks is not in the span's name
    assert bad["attributes"]["gen_ai.tool.name"] == hostile.replace("\x00", "\ufffd").replace(
        "\ud800", "\ufffd"
    ).replace("\udfff", "\ufffd")


def test_an_oversized_tool_name_is_bounded_in_the_span(client, traced, token):
    trace_id, parent = traceparent()
    name = "n" * 100_000
    post(client, token, name, {"traceparent": parent})
    tracing_setup.flush()
    (span,) = traced.wait_for(lambda spans: [s for s in spans if s["trace_id"] == trace_id] or None)
    assert span["name"] == "tools/call"  # an unknown tool: no name, whatever its length
    assert len(span["attributes"]["gen_ai.tool.name"]) <= 256


HOSTILE_CONTEXTS = [
    {"traceparent": 12},
    {"traceparent": None},
    {"traceparent": ["00-" + "a" * 32 + "-" + "b" * 16 + "-01"]},
    {"traceparent": {"x": 1}},
    {"traceparent": "00-" + "0" * 32 + "-" + "b" * 16 + "-01"},  # all-zero trace id
    {"traceparent": "00-" + "a" * 32 + "-" + "0" * 16 + "-01"},  # all-zero span id
    {"traceparent": "ff-" + "a" * 32 + "-" + "b" * 16 + "-01"},  # version ff is invalid
    {"traceparent": "00-" + "A" * 32 + "-" + "b" * 16 + "-01"},  # upper case
    {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01" + "x" * 100_000},
    {"traceparent": "\x00\n\r" * 10},
    {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "tracestate": "x" * 100_000},
    {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "tracestate": "=,=,\n,\x00"},
    {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01", "baggage": "k=" + "v" * 100_000},
    {"tracestate": "only=state"},
]


@pytest.mark.parametrize("meta", HOSTILE_CONTEXTS)
def test_a_hostile_trace_context_is_ignored_never_an_error(client, traced, token, meta):
    answer = post(client, token, "made-up", meta)
    assert answer.status_code == 400  # the unknown tool's -32602, as without a context
    assert answer.json()["error"]["code"] == -32602


def test_a_repeated_traceparent_member_is_refused_as_json_rpc(client, traced, token):
    answer = post(client, token, "made-up", raw_meta='"traceparent": "00-' + "a" * 32 + "-" + "b" * 16 + '-01"')
    answer2 = post(
        client,
        token,
        "made-up",
        {"traceparent": "00-" + "c" * 32 + "-" + "d" * 16 + "-01"},
        raw_meta='"traceparent": "00-' + "a" * 32 + "-" + "b" * 16 + '-01"',
    )
    assert answer.status_code == 400
    assert answer2.status_code == 400
    assert answer2.json()["error"]["code"] in (-32700, -32600)


def test_no_bearer_token_in_any_span(client, traced, token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRACING_CAPTURE_CONTENT": False}
    trace_id, parent = traceparent()
    post(client, token, "made-up", {"traceparent": parent})
    tracing_setup.flush()
    spans = traced.wait_for(lambda spans: [s for s in spans if s["trace_id"] == trace_id] or None)
    assert token not in json.dumps(spans)


def test_a_made_up_tool_name_is_not_a_series_of_the_duration_histogram(traced):
    from types import SimpleNamespace

    from mcp_oauth.mcp_server.tools import ToolRegistry
    from mcp_oauth.observability.tracing_mcp import OTHER, McpTracingObserver

    registry = ToolRegistry("attack-tracing")

    @registry.tool
    def known() -> str:
        return "k"

    observer = McpTracingObserver()
    attributes = {}
    for name in ("known", "made-up-" + "x" * 1000):
        call = SimpleNamespace(
            method="tools/call",
            params={"name": name},
            protocol_version=V,
            message_id=1,
            session=None,
            http_request=None,
            registry=registry,
        )
        span, context_token, metric_attributes = observer.start(call)
        from opentelemetry import context as otel_context

        otel_context.detach(context_token)
        span.end()
        attributes[name[:7]] = metric_attributes["gen_ai.tool.name"]
    assert attributes == {"known": "known", "made-up": OTHER}
