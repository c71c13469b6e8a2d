"""project/gunicorn_config.py: gunicorn's master binds without listening, so a connection is
refused until a worker listens (asyncio's ``create_server`` does, when it starts serving); an
address in use is tried again; inherited sockets are left to gunicorn. Real loopback sockets."""

from __future__ import annotations

import asyncio
import logging
import socket
from types import SimpleNamespace

import pytest

from project.gunicorn_config import BoundSocket, bound, on_starting
from tests.support.live import free_port


def master(*addresses, reuse_port=False):
    return SimpleNamespace(
        LISTENERS=[], cfg=SimpleNamespace(address=list(addresses), reuse_port=reuse_port), log=logging.getLogger("t")
    )


def test_the_port_refuses_connections_until_a_worker_serves():
    port = free_port()
    server = master(("127.0.0.1", port))
    on_starting(server)
    [listener] = server.LISTENERS
    try:
        assert isinstance(listener, BoundSocket)
        with pytest.raises(ConnectionRefusedError):  # bound, not listening: refused, not queued
            socket.create_connection(("127.0.0.1", port), timeout=2)

        async def worker() -> bytes:
            async def answer(reader, writer):
                writer.write(b"ready")
                await writer.drain()
                writer.close()

            serving = await asyncio.start_server(answer, sock=listener.sock)  # as uvicorn's worker
            async with serving:
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                data = await reader.read()
                writer.close()
                return data

        assert asyncio.run(worker()) == b"ready"
    finally:
        listener.close()


def test_an_address_in_use_is_tried_again_then_fails(monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    slept = []
    monkeypatch.setattr("project.gunicorn_config.time.sleep", slept.append)
    try:
        with pytest.raises(OSError, match="Address already in use"):
            bound(taken.getsockname(), master())
        assert slept == [1, 1, 1, 1]  # 5 attempts
    finally:
        taken.close()


@pytest.mark.parametrize(
    ("environ", "reuse_port", "address"),
    [({"LISTEN_FDS": "1"}, False, ("127.0.0.1", 1)), ({}, True, ("127.0.0.1", 1)), ({}, False, "/tmp/sock")],
)
def test_inherited_sockets_are_left_to_gunicorn(monkeypatch, environ, reuse_port, address):
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    server = master(address, reuse_port=reuse_port)
    on_starting(server)
    assert server.LISTENERS == []
