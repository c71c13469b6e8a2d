"""Shared by the tracing tests: the OTLP receiver of the session, the in-process providers
pointed at it, tracing installed for one test, the official SDK client calling tools."""

from __future__ import annotations

import atexit
import os

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_oauth.mcp_server.transport.observers import add_observer, remove_observer
from mcp_oauth.observability import tracing

from . import otlp_receiver

#: A traceparent the HTTP requests carry (the transport's context: a link of the MCP span).
HTTP_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
HTTP_SPAN_ID = "00f067aa0ba902b7"
HTTP_TRACEPARENT = f"00-{HTTP_TRACE_ID}-{HTTP_SPAN_ID}-01"


_receiver: otlp_receiver.Receiver | None = None


def shared_receiver() -> otlp_receiver.Receiver:
    """The process's one receiver, and this process's providers exporting to it (created on the
    first call, with the standard variables set only while the SDK reads them; shut down, then
    the receiver, when the process exits). One per process: the providers are."""
    global _receiver
    if _receiver is not None:
        return _receiver
    receivers = otlp_receiver.serve()
    receiver = next(receivers)
    variables = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "mcp-oauth-tests",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        from mcp_oauth.observability import tracing_setup

        assert tracing_setup.providers().owned, "a global tracer provider was installed before"
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def close() -> None:
        shut_down_providers()  # their last export before the receiver goes
        receivers.close()

    atexit.register(close)
    _receiver = receiver
    return receiver


@pytest.fixture(scope="session")
def otlp() -> otlp_receiver.Receiver:
    """The OTLP/HTTP receiver the test process's providers export to."""
    return shared_receiver()


def shut_down_providers() -> None:
    from mcp_oauth.observability import tracing_setup

    current = tracing_setup.providers()
    current.tracer_provider.shutdown()  # type: ignore[attr-defined]
    current.meter_provider.shutdown()  # type: ignore[attr-defined]


@pytest.fixture
def traced(otlp, settings):
    """Tracing installed in this process for one test (``MCP_OAUTH["TRACING"] = True``)."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRACING": True}
    assert tracing.install(add_observer)
    yield otlp
    tracing.uninstall(remove_observer)


async def call_echo_three_ways(url: str, token: str, mode: str) -> dict:
    """With the official SDK client: ``echo`` ok, ``echo`` with an empty text (a tool error) and
    an unknown tool (-32602). Returns the JSON-RPC error of the last."""
    headers = {"Authorization": f"Bearer {token}", "traceparent": HTTP_TRACEPARENT}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            ok = await client.call_tool("echo", {"text": "hi"})
            failed = await client.call_tool("echo", {"text": ""})
            try:
                await client.call_tool("no-such-tool", {})
            except MCPError as exc:
                invalid = exc.error
            else:
                raise AssertionError("an unknown tool was called")
    assert ok.is_error is not True and failed.is_error is True
    return {"invalid_message": invalid.message, "invalid_code": invalid.code}


def server_spans(spans: list[dict], trace_id: str, *names: str) -> list[dict]:
    return [s for s in spans if s["trace_id"] == trace_id and s["kind"] == "SERVER" and s["name"] in names]


#: The span names of :func:`call_echo_three_ways`'s requests, in order.
CALLS = ("tools/call echo", "tools/call echo", "tools/call")  # the third names a tool the server lacks


def by_id(spans: list[dict]) -> dict[str, dict]:
    return {s["span_id"]: s for s in spans}
