"""The refusal past the in-flight bound answered by uvicorn's HTTP protocol
(mcp_oauth.mcp_server.transport.uvicorn_shed): a real uvicorn server on loopback, raw HTTP/1.1 on
sockets. The refused request never reaches the application; the answer is the lane's (503,
Retry-After, JSON-RPC -32000 with the id, CORS); keep-alive and pipelining keep working."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest
import uvicorn
from uvicorn.server import ServerState

from mcp_oauth.mcp_server.transport import admission
from mcp_oauth.mcp_server.transport.uvicorn_shed import SheddingHttpToolsProtocol, UvicornWorker
from mcp_oauth.signals import request_shed


class App:
    """An ASGI application that answers 200 ``served <path>`` and records what reached it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, bytes]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.seen.append((scope["method"], scope["path"], body))
        content = f"served {scope['path']}".encode()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(content))]}
        )
        await send({"type": "http.response.body", "body": content})


@pytest.fixture
def server():
    app = App()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, http=SheddingHttpToolsProtocol, lifespan="on", log_level="warning", loop="asyncio")
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(instance.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not instance.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield app, sock.getsockname()[1]
    instance.should_exit = True
    thread.join(10)


@pytest.fixture
def bound(settings):
    def set_bound(n):
        settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_MAX_IN_FLIGHT": n}

    return set_bound


@pytest.fixture
def shed_signals():
    seen = []

    def receiver(sender, **kwargs):
        seen.append({k: v for k, v in kwargs.items() if k != "signal"})

    request_shed.connect(receiver)
    yield seen
    request_shed.disconnect(receiver)


def post(path: str, body: bytes, *, extra: str = "", version: str = "1.1") -> bytes:
    return (
        f"POST {path} HTTP/{version}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n{extra}\r\n"
    ).encode() + body


def call(request_id) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "echo"}}).encode()


def read_responses(sock: socket.socket, count: int, timeout: float = 5) -> list[tuple[int, dict[str, str], bytes]]:
    """``count`` HTTP responses (each with a Content-Length) read from ``sock``."""
    sock.settimeout(timeout)
    data, responses = b"", []
    while len(responses) < count:
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            assert chunk, f"connection closed after {len(responses)} responses"
            data += chunk
        head, _, data = data.partition(b"\r\n\r\n")
        lines = head.decode("latin1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers["content-length"])
        while len(data) < length:
            chunk = sock.recv(65536)
            assert chunk
            data += chunk
        responses.append((status, headers, data[:length]))
        data = data[length:]
    return responses


def test_past_the_bound_the_protocol_answers_503_with_the_id_and_the_app_never_sees_it(server, bound, shed_signals):
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", call(41)))
        [(status, headers, body)] = read_responses(sock, 1)
        # keep-alive: a second request on the same connection, with a string id
        sock.sendall(post("/mcp/", call("second")))
        [(status2, _, body2)] = read_responses(sock, 1)
    assert status == 503 and status2 == 503
    assert headers["retry-after"] == "1"
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "no-store"
    assert headers["server"] == "uvicorn" and "date" in headers  # uvicorn's default headers
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": 41,
        "error": {"code": -32000, "message": "Server overloaded", "data": {"reason": "in_flight", "retryAfter": 1}},
    }
    assert json.loads(body2)["id"] == "second"
    assert app.seen == []
    assert shed_signals == [
        {"reason": "in_flight", "client_id": None, "path": "/mcp"},
        {"reason": "in_flight", "client_id": None, "path": "/mcp/"},
    ]


def test_below_the_bound_and_on_other_paths_requests_reach_the_application(server, bound):
    app, port = server
    bound(1)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", call(1)))
        [(status, _, body)] = read_responses(sock, 1)
    assert (status, body) == (200, b"served /mcp")
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/oauth/token", b"grant_type=x") + b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answers = read_responses(sock, 2)
    # other paths and GET (the listen stream) are not refused here
    assert [(status, body) for status, _, body in answers] == [(200, b"served /oauth/token"), (200, b"served /mcp")]
    assert [(method, path) for method, path, _ in app.seen] == [
        ("POST", "/mcp"),
        ("POST", "/oauth/token"),
        ("GET", "/mcp"),
    ]


def test_pipelined_requests_are_answered_in_order(server, bound):
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        # two refusals in one write: both answered here, in order
        sock.sendall(post("/mcp", call(1)) + post("/mcp", call(2)))
        refused = read_responses(sock, 2)
        # behind a response not written yet, a refusal is left to the application (the lane sheds
        # it there), so that the answers keep the requests' order
        sock.sendall(post("/other", b"{}") + post("/mcp", call(3)))
        served = read_responses(sock, 2)
    assert [(status, json.loads(body)["id"]) for status, _, body in refused] == [(503, 1), (503, 2)]
    assert [(status, body) for status, _, body in served] == [(200, b"served /other"), (200, b"served /mcp")]
    assert [(method, path) for method, path, _ in app.seen] == [("POST", "/other"), ("POST", "/mcp")]


def test_a_body_too_large_to_peek_is_answered_at_once_with_a_null_id(server, bound):
    app, port = server
    bound(0)
    large = b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"x":"' + b"a" * admission.ID_PEEK_BYTES + b'"}}'
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", large)[:200])  # the headers and the start of the body
        [(status, _, body)] = read_responses(sock, 1)  # answered before the body is complete
        sock.sendall(post("/mcp", large)[200:])
        sock.sendall(post("/mcp", call(3)))  # the connection still serves the next request
        [(status2, _, body2)] = read_responses(sock, 1)
    assert status == 503 and json.loads(body)["id"] is None
    assert status2 == 503 and json.loads(body2)["id"] == 3
    assert app.seen == []


def test_an_unparsable_body_gets_a_null_id_and_cors_headers_for_an_allowed_origin(server, bound, settings):
    app, port = server
    bound(0)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ALLOWED_ORIGINS": ["https://app.example"]}
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", b"{not json", extra="Origin: https://app.example\r\n"))
        [(status, headers, body)] = read_responses(sock, 1)
        sock.sendall(post("/mcp", call(4), extra="Origin: https://evil.example\r\n"))
        [(_, other_headers, _)] = read_responses(sock, 1)
    assert status == 503 and json.loads(body)["id"] is None
    assert headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other_headers


def test_http_1_0_and_connection_close_are_honoured(server, bound):
    app, port = server
    bound(0)
    for request in (post("/mcp", call(5), version="1.0"), post("/mcp", call(6), extra="Connection: close\r\n")):
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            [(status, headers, _)] = read_responses(sock, 1)
            assert status == 503 and headers["connection"] == "close"
            sock.settimeout(5)
            assert sock.recv(1) == b""  # the server closed the connection


def test_the_gunicorn_worker_serves_with_the_shedding_protocol():
    assert UvicornWorker.CONFIG_KWARGS["http"] is SheddingHttpToolsProtocol


def test_a_client_that_does_not_read_its_answers_gets_uvicorns_backpressure(bound):
    """With the connection's write buffer past its high-water mark the protocol writes no more
    refusals: the request goes uvicorn's way (a task; the next ones wait in its pipeline, reading
    paused), so a client pipelining requests it never reads cannot pile answers up in memory."""
    bound(0)
    app = App()

    class Transport(asyncio.Transport):
        def __init__(self):
            super().__init__()
            self.written, self.reading = [], True

        def write(self, data):
            self.written.append(data)

        def is_closing(self):
            return False

        def get_extra_info(self, name, default=None):
            return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

        def pause_reading(self):
            self.reading = False

        def resume_reading(self):
            self.reading = True

    async def scenario():
        config = uvicorn.Config(app, http=SheddingHttpToolsProtocol, log_level="warning")
        config.load()
        protocol = SheddingHttpToolsProtocol(config, ServerState(), {})
        transport = Transport()
        protocol.connection_made(transport)
        protocol.data_received(post("/mcp", call(1)))
        assert len(transport.written) == 1 and b" 503 " in transport.written[0]  # refused here
        protocol.pause_writing()  # the client stopped reading
        protocol.data_received(post("/mcp", call(2)) + post("/mcp", call(3)))
        assert len(transport.written) == 1  # nothing more written by the protocol
        assert len(protocol.tasks) == 1 and len(protocol.pipeline) == 1  # uvicorn's way
        assert transport.reading is False  # the pipelined request paused reading
        for task in list(protocol.tasks):
            task.cancel()

    asyncio.run(scenario())
