"""OpenTelemetry tracing in process: the spans and histograms a real OTLP/HTTP receiver decodes.

The official SDK client (``mcp``) creates its own CLIENT span per request and propagates it in
``params._meta`` (SEP-414) when a tracer provider is installed — here the test process's, which
exports the client's spans to the same receiver: each server span's parent must be the client's.
"""

from __future__ import annotations

import pytest

from mcp_oauth.observability import tracing
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port, run_asgi_server
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

PROTOCOL = {"legacy": "2025-11-25", "auto": "2026-07-28"}


@pytest.fixture
def live_site(traced, settings):
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    ensure_default_resource()
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield base


@pytest.mark.parametrize(
    ("setting", "environ", "expected"),
    [
        ("auto", {}, False),
        ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ("auto", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
        ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        (True, {}, True),
        (False, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ],
)
def test_when_tracing_is_on(setting, environ, expected):
    assert tracing.tracing_enabled(setting, environ) is expected


@pytest.mark.parametrize(
    ("value", "ids"), [("yes", ["mcp_oauth.E130"]), (1.5, ["mcp_oauth.E130"]), (True, []), ("auto", [])]
)
def test_the_tracing_setting_is_checked(value, ids, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRACING": value}
    assert [message.id for message in tracing.check_tracing(None)] == ids
