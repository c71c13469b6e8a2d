"""A TCP forwarder on loopback that can cut every connection through it: a dependency's outage,
for real, between server processes and PostgreSQL or Redis (no mock).

    with TcpForwarder(5432) as forwarder:          # listens on 127.0.0.1:forwarder.port
        ...                                         # point DATABASE_URL at forwarder.port
        forwarder.stop()                            # every open connection closed, new ones refused
        forwarder.start()                           # accepting and forwarding again

It runs an asyncio loop on a thread of its own; :meth:`stop` and :meth:`start` are called from
any thread and return once done. While stopped the listening socket is closed, so a client's
``connect`` is refused (ECONNREFUSED), as when the database host is up and PostgreSQL is not.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

__all__ = ["TcpForwarder"]


class TcpForwarder:
    """``listen_host:port`` -> ``target_host:target_port`` (see the module docstring). ``listen_host``:
    127.0.0.1, or an address the test itself made (a veth end: tests/topology/test_fleet_netns.py)."""

    def __init__(
        self, target_port: int, target_host: str = "127.0.0.1", port: int = 0, listen_host: str = "127.0.0.1"
    ) -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        if not port:
            with socket.socket() as probe:
                probe.bind((listen_host, 0))
                port = probe.getsockname()[1]
        self.port = port
        self.accepted = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tcp-forwarder", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    # --- thread-safe API --------------------------------------------------------------------

    def __enter__(self) -> TcpForwarder:
        self._thread.start()
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> None:
        """Listen again (the same port) and forward new connections."""
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=5)

    def stop(self) -> None:
        """Close the listening socket and every open connection (both sides): a cut."""
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=5)

    # --- on the forwarder's loop ------------------------------------------------------------

    async def _start(self) -> None:
        if self._server is None:
            self._server = await asyncio.start_server(self._accept, self.listen_host, self.port, reuse_address=True)

    async def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for writer in list(self._writers):
            _abort(writer)
        self._writers.clear()
        for task in list(self._tasks):
            task.cancel()
        if server is not None:
            await server.wait_closed()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        if self._server is None:
            _abort(client_writer)
            return
        self.accepted += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(client_writer)
            return
        self._writers.update((client_writer, upstream_writer))
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await asyncio.gather(
                _pipe(client_reader, upstream_writer),
                _pipe(upstream_reader, client_writer),
            )
        except (asyncio.CancelledError, OSError):
            pass
        finally:
            self._tasks.discard(task)
            for writer in (client_writer, upstream_writer):
                self._writers.discard(writer)
                _abort(writer)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        _abort(writer)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close at once, no lingering buffered data (the peer sees the connection end)."""
    try:
        writer.close()
    except (OSError, RuntimeError):
        pass
