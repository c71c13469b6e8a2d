"""The listening socket of a stopping server (mcp_oauth.mcp_server.transport.listening), on real
loopback sockets: after :func:`refuse_new_connections` a connection the kernel had completed is
still accepted and answered, a new one gets no handshake, and once the socket is closed a new one
is refused; :func:`shared_with_parent` sees whether the parent process holds the same socket."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from mcp_oauth.mcp_server.transport.listening import refuse_new_connections, shared_with_parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux socket filters")


@pytest.fixture
def listener():
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock
    sock.close()


def test_queued_connections_are_served_new_ones_get_no_handshake_then_are_refused(listener):
    port = listener.getsockname()[1]
    queued = socket.create_connection(("127.0.0.1", port), timeout=2)  # completed, not accepted yet
    queued.sendall(b"POST /mcp")
    assert refuse_new_connections(listener) is True
    late = socket.socket()
    late.settimeout(0.5)
    with pytest.raises(TimeoutError):  # the SYN is dropped: no handshake, no reset
        late.connect(("127.0.0.1", port))
    late.close()
    accepted, _ = listener.accept()
    assert accepted.recv(100) == b"POST /mcp"
    accepted.sendall(b"200 OK")
    assert queued.recv(100) == b"200 OK"
    accepted.close()
    queued.close()
    listener.close()
    with pytest.raises(ConnectionRefusedError):  # a client's next SYN: refused, to be sent elsewhere
        socket.create_connection(("127.0.0.1", port), timeout=2)


def test_shared_with_parent(listener):
    assert shared_with_parent(listener) is False  # pytest's parent holds no socket of ours
    child = (
        "import socket, sys\n"
        "from mcp_oauth.mcp_server.transport.listening import shared_with_parent\n"
        "inherited = socket.socket(fileno=int(sys.argv[1]))\n"
        "print(shared_with_parent(inherited))\n"
        "own = socket.socket(); own.bind(('127.0.0.1', 0)); own.listen(1)\n"
        "print(shared_with_parent(own))\n"
    )
    answer = subprocess.run(
        [sys.executable, "-c", child, str(listener.fileno())],
        pass_fds=[listener.fileno()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert answer.stdout.split() == ["True", "False"], answer.stderr  # gunicorn's master / its own
