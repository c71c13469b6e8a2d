"""Tracing in the production topology (``make serve``'s shape): gunicorn with two uvicorn workers
and a Celery worker (prefork), each process configured by nothing but the standard
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_SERVICE_NAME``, exporting to a real OTLP/HTTP receiver.

The official SDK client calls tools in both eras; its CLIENT spans (this process's provider,
same receiver) must be the parents of the workers' SERVER spans. A task queued inside a span of
this process runs in the Celery worker's forked pool process under a CONSUMER span, its child.

Skipped unless DATABASE_URL names PostgreSQL and Redis answers (tests/topology.py).
"""

from __future__ import annotations

import asyncio
import secrets
import subprocess
import sys
import time

import pytest
from celery import Celery
from opentelemetry import trace

from mcp_oauth.observability import tracing_setup
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.topology import REDIS_URL, require_postgres_and_redis
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
from tests.support.workers import ROOT, gunicorn_server, stop, worker_env, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SERVICE = "mcp-oauth-topology"
PROTOCOL = {"legacy": "2025-11-25", "auto": "2026-07-28"}


@pytest.fixture
def topology(traced, settings):
    require_postgres_and_redis()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    ensure_default_resource()
    env = worker_env(
        base,
        "otel-" + secrets.token_hex(4),
        DJANGO_INSECURE_LOOPBACK_HTTP="1",
        REDIS_URL=REDIS_URL,
        CELERY_BROKER_URL=REDIS_URL,
        OTEL_EXPORTER_OTLP_ENDPOINT=traced.endpoint,
        OTEL_SERVICE_NAME=SERVICE,
        OTEL_BSP_SCHEDULE_DELAY="100",
        OTEL_METRIC_EXPORT_INTERVAL="500",
    )
    celery = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "project", "worker", "-l", "warning", "--concurrency", "1"],
        cwd=ROOT,
        env={**env, "CELERY_BROKER_URL": REDIS_URL},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with gunicorn_server(port, env, workers=2) as master:
            deadline = time.monotonic() + 30
            while len(worker_pids(master)) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(worker_pids(master)) == 2
            yield base
    finally:
        stop(celery)


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
def test_workers_spans_are_children_of_the_sdk_clients(mode, topology, traced, user, public_app, mint_token):
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    with trace.get_tracer("tests").start_as_current_span(f"topology {mode}") as root:
        seen = asyncio.run(call_echo_three_ways(topology + "/mcp", token, mode))
    tracing_setup.flush()  # this process's CLIENT spans
    trace_id = format(root.get_span_context().trace_id, "032x")
    spans = traced.wait_for(lambda spans: len(server_spans(spans, trace_id, *CALLS)) == 3 and spans, timeout=30)
    calls = server_spans(spans, trace_id, *CALLS)
    clients = by_id([s for s in spans if s["kind"] == "CLIENT"])
    assert [span["name"] for span in calls] == list(CALLS)
    errors = []
    for span in calls:
        client = clients[span["parent_span_id"]]
        assert client["name"] == "MCP send tools/call " + span["attributes"]["gen_ai.tool.name"]
        assert span["resource"]["service.name"] == SERVICE  # exported by a gunicorn worker
        assert span["links"] == [(HTTP_TRACE_ID, HTTP_SPAN_ID)]
        attributes = span["attributes"]
        assert attributes["jsonrpc.request.id"] == client["attributes"]["jsonrpc.request.id"]
        assert (attributes["mcp.method.name"], attributes["mcp.protocol.version"]) == ("tools/call", PROTOCOL[mode])
        assert span["name"] in ("tools/call " + attributes["gen_ai.tool.name"], "tools/call")
        assert ("mcp.session.id" in attributes) is (mode == "legacy")
        errors.append((attributes.get("error.type"), span["status"]))
    assert errors == [(None, "UNSET"), ("tool_error", "ERROR"), ("-32602", "ERROR")]
    assert seen["invalid_code"] == -32602

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        durations = [
            h
            for h in traced.histograms
            if h["name"] == "mcp.server.operation.duration"
            and h["resource"].get("service.name") == SERVICE
            and h["attributes"].get("mcp.protocol.version") == PROTOCOL[mode]
        ]
        if {h["attributes"].get("error.type") for h in durations} >= {None, "tool_error", "-32602"}:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the workers' mcp.server.operation.duration did not arrive")


def test_a_task_runs_under_a_child_of_the_span_that_queued_it(topology, traced):
    app = Celery("tracing-topology-test", broker=REDIS_URL, set_as_current=False)
    with trace.get_tracer("tests").start_as_current_span("queue cleanup") as queuing:
        message = app.send_task("mcp_oauth.tasks.cleanup")
    parent = queuing.get_span_context()
    trace_id, span_id = format(parent.trace_id, "032x"), format(parent.span_id, "016x")
    (span,) = traced.wait_for(
        lambda spans: [s for s in spans if s["trace_id"] == trace_id and s["kind"] == "CONSUMER"], timeout=60
    )
    assert span["name"] == "mcp_oauth.tasks.cleanup process"
    assert span["parent_span_id"] == span_id
    assert span["resource"]["service.name"] == SERVICE  # exported by the worker's pool process
    assert span["attributes"]["messaging.message.id"] == message.id
    assert span["attributes"]["celery.task.state"] == "SUCCESS"


def test_oauth_metadata_span_from_a_worker(topology, traced):
    import httpx2

    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    response = httpx2.get(
        topology + "/.well-known/oauth-protected-resource/mcp",
        headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
        timeout=10,
    )
    assert response.status_code == 200
    (span,) = traced.wait_for(lambda spans: [s for s in spans if s["trace_id"] == trace_id], timeout=30)
    assert (span["name"], span["parent_span_id"], span["resource"]["service.name"]) == (
        "GET /.well-known/oauth-protected-resource/<path:resource_path>",
        parent_id,
        SERVICE,
    )
    assert span["attributes"]["oauth.outcome"] == "ok"
