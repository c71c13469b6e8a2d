"""Trace context across Celery on a real worker with a real broker (Redis): the worker's span of
a task is a child of the span that queued it; with tracing off, nothing of OpenTelemetry is
imported even after serving a tools/call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from opentelemetry import trace

from mcp_oauth.observability import tracing_setup
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.topology import REDIS_URL, database_url, require_redis
from tests.support.tracing_helpers import otlp, traced  # noqa: F401 - fixtures
from tests.support.workers import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def worker(traced):
    require_redis()
    from celery import Celery, _state
    from celery.contrib.testing.worker import start_worker

    app = Celery("mcp-authz-tracing-test", set_as_current=False)
    app.config_from_object("django.conf:settings", namespace="CELERY")
    app.conf.update(broker_url=REDIS_URL, result_backend=REDIS_URL, task_always_eager=False)
    import mcp_oauth.tasks  # noqa: F401 - registers the shared tasks

    app.finalize()
    current, default = _state.get_current_app(), _state.default_app
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
            yield app
    finally:
        _state.set_default_app(default)
        current.set_current()


def test_the_workers_span_is_a_child_of_the_queuing_span(worker, traced):
    with trace.get_tracer("tests").start_as_current_span("queue cleanup") as queuing:
        result = worker.tasks["mcp_oauth.tasks.cleanup"].apply_async(ignore_result=False)
    assert result.get(timeout=30)["sessions"] == 0
    tracing_setup.flush()
    parent = queuing.get_span_context()
    trace_id, span_id = format(parent.trace_id, "032x"), format(parent.span_id, "016x")
    (span,) = traced.wait_for(lambda spans: [s for s in spans if s["trace_id"] == trace_id and s["kind"] == "CONSUMER"])
    assert span["name"] == "mcp_oauth.tasks.cleanup process"
    assert span["parent_span_id"] == span_id
    assert span["attributes"] == {
        "messaging.system": "celery",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": result.id,
        "messaging.destination.name": "celery",
        "celery.task.state": "SUCCESS",
    }


def test_a_task_queued_outside_any_span_starts_its_own_trace(worker, traced):
    result = worker.tasks["mcp_oauth.tasks.cleanup"].apply_async(ignore_result=False)
    result.get(timeout=30)
    tracing_setup.flush()
    (span,) = traced.wait_for(
        lambda spans: [s for s in spans if s["attributes"].get("messaging.message.id") == result.id]
    )
    assert span["parent_span_id"] == ""


SERVE_ONE_TOOL_CALL = textwrap.dedent(
    """
    import json, sys
    import django
    django.setup()
    from project.asgi import application
    from tests.support.asgi_client import asgi_call

    token = sys.argv[1]
    headers = {"Authorization": "Bearer " + token, "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "off", "version": "1"}}}
    status, answer_headers, _ = asgi_call(application, "POST", "/mcp", headers, json.dumps(init).encode())
    headers.update({"Mcp-Session-Id": answer_headers["mcp-session-id"], "MCP-Protocol-Version": "2025-11-25"})
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    status, _, body = asgi_call(application, "POST", "/mcp", headers, json.dumps(call).encode())
    import threading
    print(json.dumps({"status": status, "body": body.decode(),
                      "otel": sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"),
                      "ours": sorted(m for m in sys.modules if m.startswith("mcp_oauth.observability.tracing")),
                      "threads": sorted(t.name for t in threading.enumerate() if "Otel" in t.name)}))
    """
)

#: What redis-py imports of OpenTelemetry itself when the SDK is installed (redis >= 8 looks for
#: ``opentelemetry.sdk.metrics`` at import, redis/observability/providers.py): not ours.
REDIS_ALONE = (
    "import json, sys, redis, redis.asyncio; "
    'print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry")))'
)


@pytest.mark.parametrize("endpoint", [None, "http://127.0.0.1:9"], ids=["off", "auto-on"])
def test_with_tracing_off_the_app_imports_nothing_of_opentelemetry(endpoint, user, public_app, mint_token, settings):
    """Served a tools/call with tracing off, the process holds no tracing module of ours, no
    OpenTelemetry module beyond those redis-py imports by itself, and no export thread."""
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("OTEL_") and key not in ("CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")
    }
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DATABASE_URL": database_url(),
            "MCP_BASE_URL": settings.MCP_OAUTH["BASE_URL"],
            "DJANGO_ALLOWED_HOSTS": "testserver",
            "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
            "OTEL_BSP_SCHEDULE_DELAY": "60000",
        }
    )
    if endpoint:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint  # the control: "auto" turns tracing on
    done = subprocess.run(
        [sys.executable, "-c", SERVE_ONE_TOOL_CALL, token], cwd=ROOT, env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    seen = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert seen["status"] == 200 and '"isError":false' in seen["body"].replace(" ", "")
    if endpoint is None:
        alone = subprocess.run([sys.executable, "-c", REDIS_ALONE], env=env, capture_output=True, timeout=60)
        assert seen["otel"] == json.loads(alone.stdout)
        assert "opentelemetry.sdk.trace" not in seen["otel"]
        assert seen["ours"] == [  # the switch and the ASGI lane (that returned the app itself); no OpenTelemetry
            "mcp_oauth.observability.tracing",
            "mcp_oauth.observability.tracing_http",
            "mcp_oauth.observability.tracing_oauth",
        ]
        assert seen["threads"] == []
    else:
        assert {"opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http.trace_exporter"} <= set(seen["otel"])
        assert "mcp_oauth.observability.tracing_runtime" in seen["ours"]
        assert seen["threads"] == ["OtelBatchSpanRecordProcessor", "OtelPeriodicExportingMetricReader"]
