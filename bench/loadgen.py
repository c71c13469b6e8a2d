"""A small keep-alive HTTP/1.1 load generator for the MCP benchmarks (asyncio, raw sockets).

Kept minimal so that the client spends little CPU next to the servers it measures: it writes
prepared requests, reads the status line and headers, then a Content-Length or chunked body
(an SSE ``tools/call`` answer is read to its end). Used by ``bench/prod_topology.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json_messages(self) -> list[dict]:
        """The JSON-RPC messages of a JSON or SSE body."""
        if self.headers.get("content-type", "").startswith("text/event-stream"):
            return [
                json.loads(line[5:])
                for line in self.body.decode().splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        return [json.loads(self.body)] if self.body else []


class NoResponse(ConnectionError):
    """The server closed (or reset) the connection before any byte of the response: the request
    may be sent again on a new connection, as HTTP clients do for an idle keep-alive connection
    the server closed (RFC 9112 §9.3.1)."""


class Connection:
    """One keep-alive connection to ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
            self.writer = None

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> Response:
        if self.writer is None:
            await self.open()
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        head += [f"{name}: {value}" for name, value in headers.items()]
        reader = self.reader
        try:
            self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            status_line = await reader.readline()
        except ConnectionResetError as exc:
            await self.close()
            raise NoResponse(f"connection reset before the response: {exc}") from exc
        if not status_line:
            await self.close()
            raise NoResponse("connection closed by the server")
        status = int(status_line.split()[1])
        response_headers: dict[str, str] = {}
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            response_headers[name.strip().lower()] = value.strip()
        if "content-length" in response_headers:
            data = await reader.readexactly(int(response_headers["content-length"]))
        elif response_headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await reader.readline()
                    break
                parts.append(await reader.readexactly(size))
                await reader.readline()
            data = b"".join(parts)
        else:
            data = await reader.read()
            await self.close()
        if response_headers.get("connection", "").lower() == "close":
            await self.close()
        return Response(status, response_headers, data)


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0  # dropped connections, malformed answers

    def add(self, status: int, seconds: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.latencies.append(seconds)

    def merge(self, other: Tally) -> None:
        self.latencies += other.latencies
        self.errors += other.errors
        for status, count in other.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + count


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(
    connection: Connection, tally: Tally, method: str, path: str, headers: dict[str, str], body: bytes = b""
) -> Response | None:
    started = time.perf_counter()
    try:
        response = await connection.request(method, path, headers, body)
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
        tally.errors += 1
        await connection.close()
        return None
    tally.add(response.status, time.perf_counter() - started)
    return response
