"""The in-flight bound of the MCP endpoint (mcp_oauth.mcp_server.transport.admission): past it a
fast 503 with Retry-After and a JSON-RPC error, in the ASGI lane and in the Django view, both eras;
health probes and streams are not counted."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.core.asgi import get_asgi_application
from django.http import StreamingHttpResponse

from mcp_oauth.health import health_lane
from mcp_oauth.mcp_server.transport import admission
from mcp_oauth.mcp_server.transport.asgi import McpLane
from mcp_oauth.signals import request_shed
from tests.support.asgi_client import asgi_call, http_scope

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture
def bound(settings):
    """``bound(n)``: MCP_MAX_IN_FLIGHT = n; the places taken by the test are given back after it."""
    held: list[admission.Ticket] = []

    def set_bound(n, *, take=0):
        settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_MAX_IN_FLIGHT": n}
        for _ in range(take):
            ticket = admission.admit()
            assert ticket is not None
            held.append(ticket)
        return held

    yield set_bound
    for ticket in held:
        ticket.leave()
    assert admission.in_flight.count == 0


@pytest.fixture
def lane():
    return McpLane(get_asgi_application())


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


@pytest.fixture
def shed_signals():
    seen = []

    def receiver(sender, **kwargs):
        seen.append({k: v for k, v in kwargs.items() if k != "signal"})

    request_shed.connect(receiver)
    yield seen
    request_shed.disconnect(receiver)


def modern(token, request_id=7, text="hi"):
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}, "_meta": MODERN_META},
        }
    ).encode()
    headers = {
        "authorization": f"Bearer {token}",
        "accept": ACCEPT,
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    return headers, body


def legacy_session(lane, token):
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"authorization": f"Bearer {token}", "accept": ACCEPT, "content-type": "application/json"}
    status, response_headers, body = asgi_call(lane, "POST", "/mcp", headers, json.dumps(init).encode())
    assert status == 200, body
    return {**headers, "mcp-session-id": response_headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}


def overloaded(request_id):
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32000, "message": "Server overloaded", "data": {"reason": "in_flight", "retryAfter": 1}},
    }


def test_past_the_bound_the_lane_answers_503_with_the_modern_request_id(lane, token, bound, shed_signals):
    bound(2, take=2)
    headers, body = modern(token, request_id="call-7")
    status, response_headers, answer = asgi_call(lane, "POST", "/mcp", headers, body)
    assert status == 503
    assert response_headers["retry-after"] == "1"
    assert response_headers["content-type"] == "application/json"
    assert response_headers["cache-control"] == "no-store"
    assert response_headers["x-content-type-options"] == "nosniff"
    assert json.loads(answer) == overloaded("call-7")
    assert shed_signals == [{"reason": "in_flight", "client_id": None, "path": "/mcp"}]
    assert admission.in_flight.count == 2  # the refused request took no place


def test_past_the_bound_a_2025_session_request_gets_its_id_back(lane, token, bound):
    headers = legacy_session(lane, token)
    bound(1, take=1)
    call = {"jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    status, response_headers, answer = asgi_call(lane, "POST", "/mcp", headers, json.dumps(call).encode())
    assert status == 503
    assert response_headers["retry-after"] == "1"
    assert json.loads(answer) == overloaded(41)


def test_a_body_that_does_not_parse_gets_a_null_id(lane, token, bound):
    bound(1, take=1)
    headers, _ = modern(token)
    status, _, answer = asgi_call(lane, "POST", "/mcp", headers, b'{"jsonrpc": "2.0", "id": 3, ')
    assert status == 503
    assert json.loads(answer) == overloaded(None)


def test_a_body_too_large_to_peek_is_not_read_and_gets_a_null_id(lane, token, bound):
    bound(1, take=1)
    headers, _ = modern(token)
    big = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"pad": "x" * 70_000}}).encode()
    status, _, answer = asgi_call(lane, "POST", "/mcp", headers, big)
    assert status == 503
    assert json.loads(answer) == overloaded(None)


def test_an_invalid_id_is_not_echoed(lane, token, bound):
    bound(1, take=1)
    headers, _ = modern(token)
    status, _, answer = asgi_call(lane, "POST", "/mcp", headers, b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}')
    assert status == 503
    assert json.loads(answer)["id"] is None


def test_below_the_bound_calls_are_served_and_give_their_place_back(lane, token, bound):
    bound(1)  # one place: the lane counts the request once (the view does not count it again)
    for text in ("a", "b", "c"):
        headers, body = modern(token, text=text)
        status, _, answer = asgi_call(lane, "POST", "/mcp", headers, body)
        assert status == 200, answer
        assert json.loads(answer)["result"]["content"] == [{"type": "text", "text": text}]
        assert admission.in_flight.count == 0
    # a refused token gives its place back too
    headers, body = modern("not-a-token")
    status, _, _ = asgi_call(lane, "POST", "/mcp", headers, body)
    assert status == 401
    assert admission.in_flight.count == 0


def test_the_place_is_given_back_before_the_last_body_message_is_sent(lane, token, bound):
    """A keep-alive client sends its next request as soon as it has the answer, which may be before
    the request's task has finished: the place must already be free (no 503 at the bound)."""
    bound(1)
    headers, body = modern(token)
    counts_at_last_body = []

    async def drive():
        scope = http_scope("POST", "/mcp", headers)
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                counts_at_last_body.append(admission.in_flight.count)

        await lane(scope, receive, send)

    asyncio.run(drive())
    assert counts_at_last_body == [0]


def test_freed_place_serves_the_next_request(lane, token, bound):
    held = bound(1, take=1)
    headers, body = modern(token)
    assert asgi_call(lane, "POST", "/mcp", headers, body)[0] == 503
    held.pop().leave()
    assert asgi_call(lane, "POST", "/mcp", headers, body)[0] == 200


def test_no_bound_when_the_setting_is_none(lane, token, bound):
    bound(None, take=50)
    headers, body = modern(token)
    assert asgi_call(lane, "POST", "/mcp", headers, body)[0] == 200


def test_get_streams_and_cors_preflights_are_not_counted(lane, token, bound):
    bound(1, take=1)
    preflight = {"origin": "http://127.0.0.1:3000", "access-control-request-method": "POST"}
    assert asgi_call(lane, "OPTIONS", "/mcp", preflight)[0] == 204
    # a GET goes on to its own checks (here: a 2026-07-28 client has no GET stream: 405), not a 503
    status, _, _ = asgi_call(
        lane,
        "GET",
        "/mcp",
        {"authorization": f"Bearer {token}", "accept": "text/event-stream", "mcp-protocol-version": "2026-07-28"},
    )
    assert status == 405


def test_the_shed_answer_carries_cors_headers_for_an_allowed_origin(lane, token, bound):
    bound(1, take=1)
    headers, body = modern(token)
    status, response_headers, _ = asgi_call(lane, "POST", "/mcp", {**headers, "origin": "http://127.0.0.1:3000"}, body)
    assert status == 503
    assert response_headers["access-control-allow-origin"] == "http://127.0.0.1:3000"
    assert "Retry-After" in response_headers["access-control-expose-headers"]
    status, response_headers, _ = asgi_call(lane, "POST", "/mcp", {**headers, "origin": "https://evil.example"}, body)
    assert status == 503
    assert "access-control-allow-origin" not in response_headers


def test_the_django_view_counts_requests_served_without_the_lane(client, token, bound, shed_signals):
    """A site that keeps its own asgi.py (or WSGI) serves /mcp through its URLconf: same bound."""
    headers, body = modern(token, request_id=12)
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items() if k != "content-type"}
    bound(1)
    response = client.post("/mcp", data=body, content_type="application/json", **extra)
    assert response.status_code == 200, response.content
    assert admission.in_flight.count == 0
    bound(1, take=1)
    response = client.post("/mcp", data=body, content_type="application/json", **extra)
    assert response.status_code == 503
    assert response["Retry-After"] == "1"
    assert json.loads(response.content) == overloaded(12)
    assert shed_signals == [{"reason": "in_flight", "client_id": None, "path": "/mcp"}]


def test_health_probes_answer_while_the_endpoint_sheds(lane, token, bound, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "READINESS_CHECKS": ["database", "cache"]}
    app = health_lane(lane)
    bound(1, take=1)
    headers, body = modern(token)
    assert asgi_call(app, "POST", "/mcp", headers, body)[0] == 503
    status, _, answer = asgi_call(app, "GET", "/healthz", {})
    assert (status, json.loads(answer)) == (200, {"status": "alive"})
    status, _, answer = asgi_call(app, "GET", "/readyz", {})
    assert status == 200
    assert json.loads(answer)["status"] == "ready"


def test_an_event_stream_stops_holding_its_place_once_it_starts(bound):
    """A response that turned into an event stream (a long tools/call, subscriptions/listen) does
    not hold the bound for its lifetime: the next request is admitted while it streams."""
    release = asyncio.Event()

    async def stream():
        yield b"event: message\ndata: {}\n\n"
        await release.wait()

    async def streaming_view(request):
        return StreamingHttpResponse(stream(), content_type="text/event-stream")

    lane = McpLane(get_asgi_application(), view=streaming_view)
    bound(1)

    async def scenario():
        started = asyncio.Event()
        sent = []

        async def receive():
            await asyncio.sleep(3600)

        async def send(message):
            sent.append(message)
            if message["type"] == "http.response.body":
                started.set()

        async def receive_body():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        scope = http_scope("POST", "/mcp", {"content-type": "application/json", "content-length": "2"})
        calls = iter([receive_body])

        async def first_receive():
            nxt = next(calls, None)
            return await (nxt() if nxt else receive())

        task = asyncio.ensure_future(lane(scope, first_receive, send))
        await asyncio.wait_for(started.wait(), 10)
        assert sent[0]["status"] == 200
        count_while_streaming = admission.in_flight.count
        release.set()
        await asyncio.wait_for(task, 10)
        return count_while_streaming

    assert asyncio.run(scenario()) == 0
    assert admission.in_flight.count == 0


def test_request_id_of():
    assert admission.request_id_of(b'{"jsonrpc":"2.0","id":5,"method":"ping"}') == 5
    assert admission.request_id_of(b'{"jsonrpc":"2.0","id":"a","method":"ping"}') == "a"
    assert admission.request_id_of(b'{"jsonrpc":"2.0","method":"notifications/initialized"}') is None
    assert admission.request_id_of(b"[1, 2]") is None
    assert admission.request_id_of(b'{"id": true}') is None
    assert admission.request_id_of(b'{"id": null}') is None
    assert admission.request_id_of(b"") is None


def test_request_id_of_reads_the_body_as_the_endpoint_does():
    """A body the endpoint's parser refuses (-32700, id null) has no id to echo in a refusal either."""
    assert admission.request_id_of(b'{"id":1,"id":2}') is None
    assert admission.request_id_of('{"id":7}'.encode("utf-16")) is None
    assert admission.request_id_of(b'\xef\xbb\xbf{"id":7}') is None
    assert admission.request_id_of(b'{"id":7,"params":{"x":NaN}}') is None
    assert admission.request_id_of(b'{"id":7,"params":{"x":1e999}}') is None
    assert admission.request_id_of(b"[" * 100_000) is None
    assert admission.request_id_of(b'{"id":7,"params":{"x":1.5}}') == 7


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"MCP_MAX_IN_FLIGHT": -1}, 'MCP_OAUTH["MCP_MAX_IN_FLIGHT"] must be None or an integer of at least 0.'),
        ({"MCP_MAX_IN_FLIGHT": "32"}, 'MCP_OAUTH["MCP_MAX_IN_FLIGHT"] must be None or an integer of at least 0.'),
        (
            {"MCP_SHED_RETRY_AFTER_SECONDS": 0},
            'MCP_OAUTH["MCP_SHED_RETRY_AFTER_SECONDS"] must be an integer of at least 1.',
        ),
        (
            {"MCP_RATE_LIMIT": {"rate": 0}},
            'MCP_OAUTH["MCP_RATE_LIMIT"]: rate must be a number of requests per second > 0, got 0',
        ),
    ],
)
def test_system_check_e098(settings, overrides, problem):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, **overrides}
    assert [(m.id, m.msg) for m in admission.check_settings()] == [("mcp_oauth.E098", problem)]
    with pytest.raises(SystemCheckError, match="mcp_oauth.E098"):
        call_command("check")


def test_system_check_accepts_the_defaults_and_none(settings):
    assert admission.check_settings() == []
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_MAX_IN_FLIGHT": None, "MCP_RATE_LIMIT": {"rate": 5, "burst": 10}}
    assert admission.check_settings() == []
