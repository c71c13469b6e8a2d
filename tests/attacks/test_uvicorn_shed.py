"""A hostile HTTP client against the in-flight bound's refusal written by uvicorn's protocol
(mcp_oauth.mcp_server.transport.uvicorn_shed): raw sockets on a real uvicorn on loopback.

Never a hang, never a 500 from the protocol, never an id echoed that the MCP parser would not read:
a body with a repeated ``id`` member or a body that is not UTF-8 is "Parse error" to the server
(id null), so its refusal echoes no id either. Malformed framing is uvicorn's 400, pipelining and
``Expect: 100-continue`` keep their order, a client dripping its headers holds no one else up."""

from __future__ import annotations

import json
import re
import socket

import pytest

from mcp_oauth.mcp_server.transport import admission
from tests.mcp_oauth.mcp_server.transport.test_uvicorn_shed import (  # noqa: F401 - fixtures
    bound,
    call,
    post,
    read_responses,
    server,
)


def read_all(sock: socket.socket, timeout: float = 5) -> bytes:
    """Everything the server sends until it closes the connection (fails on a hang)."""
    sock.settimeout(timeout)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call"}',
        b'{"jsonrpc":"2.0","id":"victim","method":"tools/call","params":{},"id":"attacker"}',
        '{"jsonrpc":"2.0","id":7,"method":"tools/call"}'.encode("utf-16"),
        '{"jsonrpc":"2.0","id":7,"method":"tools/call"}'.encode("utf-32"),
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":NaN}}',
        b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":1e999}}',
        b'\xef\xbb\xbf{"jsonrpc":"2.0","id":7,"method":"tools/call"}',
    ],
    ids=["repeated-id", "repeated-string-id", "utf-16", "utf-32", "nan", "overflowing-float", "bom"],
)
def test_the_refusal_echoes_no_id_the_mcp_parser_would_not_read(server, bound, body):
    """The server's own parser refuses these bodies with -32700 and a null id; the refusal past the
    bound must not echo an id the request never validly carried (JSON-RPC 2.0 §5)."""
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", body))
        [(status, _, content)] = read_responses(sock, 1)
    assert status == 503
    assert json.loads(content)["id"] is None
    assert admission.request_id_of(body) is None
    assert app.seen == []


def test_chunked_body_is_refused_at_once_with_a_null_id_and_the_connection_serves_on(server, bound):
    app, port = server
    bound(0)
    body = call(11)
    chunked = (
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x\r\n" % len(body)
        + body
        + b"\r\n0\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(chunked + post("/mcp", call(12)))
        [(status, _, first), (status2, _, second)] = read_responses(sock, 2)
    assert (status, json.loads(first)["id"]) == (503, None)
    assert (status2, json.loads(second)["id"]) == (503, 12)
    assert app.seen == []


def test_invalid_chunking_after_a_refusal_is_a_400_and_a_close_never_a_hang(server, bound):
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nnot hex\r\n")
        data = read_all(sock)
    statuses = [int(status) for status in re.findall(rb"HTTP/1\.1 (\d{3}) ", data)]
    assert statuses == [503, 400]
    assert app.seen == []


@pytest.mark.parametrize(
    "head",
    [
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /mcp HTTP/9.9\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /mcp\x00 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
    ],
    ids=["two-lengths", "negative-length", "length-and-chunked", "http-9.9", "nul-in-target"],
)
def test_malformed_framing_is_uvicorns_400_never_a_refusal_with_an_id(server, bound, head):
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        data = read_all(sock)
    assert data.startswith(b"HTTP/1.1 400 "), data[:80]
    assert app.seen == []


def test_huge_headers_are_answered_and_the_server_serves_the_next_client(server, bound):
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", call(1), extra="X-Padding: " + "a" * 200_000 + "\r\n"))
        sock.settimeout(10)
        head = sock.recv(64)
    assert head.startswith((b"HTTP/1.1 503 ", b"HTTP/1.1 400 ", b"HTTP/1.1 431 "))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(post("/mcp", call(2)))
        [(status, _, content)] = read_responses(sock, 1)
    assert (status, json.loads(content)["id"]) == (503, 2)


def test_a_client_dripping_its_headers_holds_no_one_else_up(server, bound):
    app, port = server
    bound(0)
    slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
    try:
        for sock in slow:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Le")
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(post("/mcp", call("served")))
            [(status, _, content)] = read_responses(sock, 1)
        assert (status, json.loads(content)["id"]) == (503, "served")
        for sock in slow:  # a body shorter than declared waits for the rest, then is refused
            sock.sendall(b"ngth: 2\r\n\r\n{")
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(post("/other", b"{}"))
            [(status, _, _)] = read_responses(sock, 1)
        assert status == 200
    finally:
        for sock in slow:
            sock.close()
    assert [seen[1] for seen in app.seen] == ["/other"]


def test_expect_100_continue_goes_to_the_lane_and_is_answered(server, bound):
    app, port = server
    bound(0)
    body = call(21)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            post("/mcp", b"", extra="Expect: 100-continue\r\n").replace(
                b"Content-Length: 0", b"Content-Length: %d" % len(body)
            )
        )
        sock.settimeout(5)
        interim = sock.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 ")
        sock.sendall(body)
        [(status, _, content)] = read_responses(sock, 1)
    assert (status, content) == (200, b"served /mcp")  # the lane (here the test app) answers it
    assert app.seen == [("POST", "/mcp", body)]


def test_pipelined_refusals_and_served_requests_keep_their_order_and_ids(server, bound):
    app, port = server
    bound(0)
    batch = b"".join(
        [
            post("/mcp", call("a")),
            post("/other", b"1"),
            post("/mcp", call("b")),
            post("/mcp/", call("c")),
            post("/other", b"2"),
            post("/mcp", call("d"), extra="Connection: close\r\n"),
        ]
    )
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(batch)
        responses = read_responses(sock, 6)
        sock.settimeout(5)
        assert sock.recv(1) == b""
    # A request behind a served one goes the lane's way (here the test application serves it);
    # one refused by the protocol carries its own id. Either way, in order.
    paths = ["/mcp", "/other", "/mcp", "/mcp/", "/other", "/mcp"]
    for (status, _, content), path, request_id in zip(responses, paths, ["a", None, "b", "c", None, "d"], strict=True):
        if status == 503:
            assert json.loads(content)["id"] == request_id and request_id is not None
        else:
            assert (status, content) == (200, f"served {path}".encode())
    assert responses[0][0] == 503 and responses[1][0] == 200


@pytest.mark.parametrize("target", ["/%6Dcp", "/MCP", "/mcp//", "/mcp/..", "/mcp?x=1", "*"])
def test_odd_targets_are_refused_only_when_they_are_the_mcp_path(server, bound, target):
    """Only ``MCP_PATH`` (with or without its slash, any query) is refused by the protocol; every
    other target reaches the application (whose lane decides), and none hangs."""
    app, port = server
    bound(0)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}".encode()
        )
        data = read_all(sock)
    status = int(data.split(b" ", 2)[1])
    assert status == (503 if target == "/mcp?x=1" else 200), data[:120]
