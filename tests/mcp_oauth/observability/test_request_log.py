"""The structured request log (mcp_oauth.observability.request_log): one JSON line per HTTP request,
through the real ASGI stack (request_log_lane around the token and MCP lanes and Django)."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.asgi import get_asgi_application

from mcp_oauth.authorization_server.asgi import token_lane
from mcp_oauth.mcp_server.transport import observers
from mcp_oauth.mcp_server.transport.asgi import mcp_lane
from mcp_oauth.observability import request_log
from mcp_oauth.observability.request_log import FIELDS, JsonFormatter, request_log_lane
from tests.support.oauth_helpers import basic

pytestmark = pytest.mark.django_db(transaction=True)

V = "2026-07-28"
LINE_KEYS = ["time", "level", "logger", "message", *FIELDS]


@pytest.fixture
def log_on(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_LOG_ENABLED": True}
    settings.ALLOWED_HOSTS = ["testserver", "127.0.0.1", "localhost"]
    observers.add_observer(request_log.observer)
    yield request_log_lane(token_lane(mcp_lane(get_asgi_application())))
    observers.remove_observer(request_log.observer)


def serve(app, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None, span=None) -> int:
    """Serve one request through ``app``; ``span``: an OpenTelemetry span current while it is served."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")] + [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }

    served = app
    if span is not None:  # as an OpenTelemetry ASGI middleware outside the lane would
        from opentelemetry import trace

        async def served(scope, receive, send):
            with trace.use_span(span):
                await app(scope, receive, send)

    async def run() -> int:
        communicator = ApplicationCommunicator(served, scope)
        await communicator.send_input({"type": "http.request", "body": body, "more_body": False})
        start = await communicator.receive_output(10)
        while True:
            message = await communicator.receive_output(10)
            if not message.get("more_body"):
                break
        await communicator.wait(10)
        return start["status"]

    return async_to_sync(run)()


def lines(caplog) -> list[dict]:
    formatter = JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.name == "mcp_oauth.requests"]


def test_a_tool_call_is_one_json_line_with_exactly_these_keys(log_on, caplog, resource, user, public_app, mint_token):
    token = mint_token(user, public_app, resource=resource.uri)
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta},
    }
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    status = serve(
        log_on,
        "POST",
        "/mcp",
        json.dumps(message).encode(),
        {
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": V,
            "Mcp-Method": "tools/call",
            "Mcp-Name": "echo",
        },
    )
    assert status == 200
    [line] = lines(caplog)
    assert list(line) == LINE_KEYS
    assert line["level"] == "INFO" and line["logger"] == "mcp_oauth.requests"
    assert line["time"].endswith("Z")
    assert line["message"] == "POST /mcp 200"
    assert (line["method"], line["path"], line["status"]) == ("POST", "/mcp", 200)
    assert (line["mcp_method"], line["tool"]) == ("tools/call", "echo")
    assert (line["client_id"], line["user_id"]) == (public_app.client_id, user.pk)
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert line["trace_id"] is None  # no span is current


def test_a_token_request_names_its_client(log_on, caplog, service):
    app, secret = service
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    status = serve(
        log_on,
        "POST",
        "/oauth/token",
        b"grant_type=client_credentials",
        {"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic(app.client_id, secret)},
    )
    assert status == 200
    [line] = lines(caplog)
    assert list(line) == LINE_KEYS
    assert (line["path"], line["status"], line["client_id"], line["user_id"]) == (
        "/oauth/token",
        200,
        app.client_id,
        None,
    )
    assert line["mcp_method"] is None and line["tool"] is None


def test_a_page_and_a_refusal(log_on, caplog, resource):
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    assert serve(log_on, "GET", "/.well-known/oauth-protected-resource/mcp") == 200
    assert serve(log_on, "POST", "/mcp", b"{}", {"Content-Type": "application/json"}) == 401
    first, second = lines(caplog)
    assert (first["method"], first["path"], first["status"], first["client_id"]) == (
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        200,
        None,
    )
    assert (second["status"], second["mcp_method"], second["client_id"]) == (401, None, None)


def test_the_trace_id_of_a_current_span(log_on, caplog, resource):
    trace = pytest.importorskip("opentelemetry.trace")
    context = trace.SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=trace.TraceFlags(1),
    )
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    span = trace.NonRecordingSpan(context)
    assert serve(log_on, "GET", "/.well-known/oauth-protected-resource/mcp", span=span) == 200
    [line] = lines(caplog)
    assert line["trace_id"] == "0af7651916cd43dd8448eb211c80319c"


def test_off_the_lane_is_the_application_itself(settings):
    app = get_asgi_application()
    assert request_log_lane(app) is app


def test_the_formatter_adds_an_exception():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert list(line) == ["time", "level", "logger", "message", "exception"]
    assert line["message"] == "failed here" and "ValueError: boom" in line["exception"]
