"""The load of ``bench/overload.py``: 2026-07-28 ``tools/call`` of ``echo`` sent closed-loop
(:func:`closed_loop`: each client sends its next call once the last is answered) or open-loop
(:class:`OpenLoop`: on a fixed schedule, whatever the answers do, latency counted from when each
request was due, as wrk2 does), with every answer checked (:func:`check_answer`)."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from dataclasses import dataclass, field

from bench.loadgen import Connection

ACCEPT = "application/json, text/event-stream"
MODERN_VERSION = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "overload", "version": "1"},
}


def call_body(n: int) -> bytes:
    """A stateless 2026-07-28 ``tools/call`` of ``echo`` (no session: every request stands alone)."""
    params = {"name": "echo", "arguments": {"text": "hello"}, "_meta": MODERN_META}
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}).encode()


def call_headers(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": ACCEPT,
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }


def is_success(status: int, body: bytes, n: int) -> bool:
    if status != 200:
        return False
    try:
        messages = [json.loads(body)]
    except ValueError:  # an SSE answer
        messages = [json.loads(line[5:]) for line in body.decode().splitlines() if line.startswith("data:")]
    return any(
        m.get("id") == n and isinstance(m.get("result"), dict) and not m["result"].get("isError") for m in messages
    )


def is_jsonrpc_error(body: bytes, code: int) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return message.get("jsonrpc") == "2.0" and "id" in message and message.get("error", {}).get("code") == code


# --- the site -------------------------------------------------------------------------------


@dataclass
class Result:
    statuses: dict[int, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    ok: int = 0
    timeouts: int = 0
    dropped: int = 0
    bad_503: int = 0  # a 503 without Retry-After or without a JSON-RPC -32000 body
    bad_429: int = 0
    late: int = 0  # answered after 1 s
    sent: int = 0
    seconds: float = 0.0

    def add(self, status: int, seconds: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.latencies.append(seconds)
        if seconds > 1.0:
            self.late += 1

    @property
    def other_5xx(self) -> int:
        return sum(count for status, count in self.statuses.items() if status >= 500 and status != 503)


class Pool:
    """Idle keep-alive connections, a new one when none is idle (the closed-loop clients)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.idle: list[Connection] = []

    async def take(self) -> Connection:
        if self.idle:
            return self.idle.pop()
        connection = Connection("127.0.0.1", self.port)
        await connection.open()
        return connection

    def give(self, connection: Connection) -> None:
        self.idle.append(connection)

    async def close(self) -> None:
        for connection in self.idle:
            await connection.close()
        self.idle.clear()


def check_answer(result: Result, status: int, head: bytes, body: bytes, n: int, seconds: float) -> None:
    result.add(status, seconds)
    if status == 503 and (b"\r\nretry-after:" not in head.lower() or not is_jsonrpc_error(body, -32000)):
        result.bad_503 += 1
    elif status == 429 and b"\r\nretry-after:" not in head.lower():
        result.bad_429 += 1
    elif is_success(status, body, n):
        result.ok += 1


async def one_call(pool: Pool, headers: dict[str, str], n: int, result: Result, timeout: float) -> None:
    started = time.perf_counter()
    connection = None
    try:
        connection = await asyncio.wait_for(pool.take(), timeout)
        response = await asyncio.wait_for(
            connection.request("POST", "/mcp", headers, call_body(n)), timeout - (time.perf_counter() - started)
        )
    except TimeoutError:
        result.timeouts += 1
        if connection is not None:
            await connection.close()
        return
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
        result.dropped += 1
        if connection is not None:
            await connection.close()
        return
    head = "".join(f"\r\n{k}: {v}" for k, v in response.headers.items()).encode()
    check_answer(result, response.status, head, response.body, n, time.perf_counter() - started)
    if response.headers.get("connection", "").lower() == "close":
        await connection.close()
    else:
        pool.give(connection)


async def closed_loop(port: int, token: str, connections: int, seconds: float) -> Result:
    """``connections`` clients each sending its next call when the previous one is answered."""
    result = Result()
    headers = call_headers(token)
    deadline = time.monotonic() + seconds
    counter = iter(range(1, 1 << 62))

    async def client() -> None:
        pool = Pool(port)
        while time.monotonic() < deadline:
            result.sent += 1
            await one_call(pool, headers, next(counter), result, timeout=10)
        await pool.close()

    started = time.monotonic()
    await asyncio.gather(*(client() for _ in range(connections)))
    result.seconds = time.monotonic() - started
    return result


class _Client(asyncio.Protocol):
    """One keep-alive connection of :class:`OpenLoop`: one request at a time, Content-Length
    answers (what the MCP endpoint sends for JSON), parsed with a few byte searches."""

    def __init__(self, driver: OpenLoop) -> None:
        self.driver = driver
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.n = 0
        self.scheduled = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, n: int, scheduled: float) -> None:
        self.n, self.scheduled = n, scheduled
        assert self.transport is not None
        self.transport.write(self.driver.request(n))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0 or not self.n:
            return
        head = bytes(self.buffer[:end])
        lower = head.lower()
        at = lower.find(b"\r\ncontent-length:")
        if at < 0:  # not an answer this client reads (chunked): count it as dropped
            self.driver.lost(self, answered=False)
            assert self.transport is not None
            self.transport.close()
            return
        line_end = lower.find(b"\r\n", at + 2)
        length = int(lower[at + 17 : line_end if line_end > 0 else len(lower)])
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        n, self.n = self.n, 0
        self.driver.answered(self, int(head[9:12]), lower, body, n, self.scheduled)

    def connection_lost(self, exc: Exception | None) -> None:
        self.driver.lost(self, answered=not self.n)


class OpenLoop:
    """Open-loop load on ``connections`` keep-alive connections (as wrk2 does): requests are due
    on a fixed schedule; one due while every connection is busy waits for the next free one, and
    its latency counts from when it was due (no coordinated omission). A request still waiting
    ``timeout`` seconds after it was due is a timeout."""

    def __init__(self, port: int, token: str, connections: int, timeout: float) -> None:
        self.port, self.connections, self.timeout = port, connections, timeout
        self.result = Result()
        self.idle: list[_Client] = []
        self.busy: set[_Client] = set()
        self.backlog: collections.deque[tuple[int, float]] = collections.deque()
        headers = "".join(f"{k}: {v}\r\n" for k, v in call_headers(token).items())
        self._head = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}".encode()
        self._reconnects: set[asyncio.Task] = set()

    def request(self, n: int) -> bytes:
        body = call_body(n)
        return self._head + b"Content-Length: %d\r\n\r\n" % len(body) + body

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, client = await loop.create_connection(lambda: _Client(self), "127.0.0.1", self.port)
        except OSError:
            await asyncio.sleep(0.05)
            self._reconnect()
            return
        self._free(client)

    def _reconnect(self) -> None:
        task = asyncio.ensure_future(self.connect())
        self._reconnects.add(task)
        task.add_done_callback(self._reconnects.discard)

    def _free(self, client: _Client) -> None:
        now = time.perf_counter()
        while self.backlog:
            n, due = self.backlog.popleft()
            if now - due > self.timeout:
                self.result.timeouts += 1
                continue
            self.busy.add(client)
            client.send(n, due)
            return
        self.busy.discard(client)
        self.idle.append(client)

    def submit(self, n: int, due: float) -> None:
        self.result.sent += 1
        if self.idle:
            client = self.idle.pop()
            self.busy.add(client)
            client.send(n, due)
        else:
            self.backlog.append((n, due))

    def answered(self, client: _Client, status: int, head: bytes, body: bytes, n: int, due: float) -> None:
        check_answer(self.result, status, head, body, n, time.perf_counter() - due)
        if b"\r\nconnection: close" in head:
            self.busy.discard(client)
            assert client.transport is not None
            client.transport.close()
            return
        self._free(client)

    def lost(self, client: _Client, answered: bool) -> None:
        if client in self.busy:
            self.busy.discard(client)
            if not answered:
                client.n = 0
                self.result.dropped += 1
            self._reconnect()
        elif client in self.idle:
            self.idle.remove(client)
            self._reconnect()

    async def run(self, rate: float, seconds: float) -> Result:
        await asyncio.gather(*(self.connect() for _ in range(self.connections)))
        started = time.perf_counter()
        n = 0
        while True:
            now = time.perf_counter()
            if now - started >= seconds:
                break
            due = int((now - started) * rate)
            while n < due:
                n += 1
                self.submit(n, started + n / rate)
            await asyncio.sleep(0.001)
        self.result.seconds = time.perf_counter() - started
        deadline = time.perf_counter() + self.timeout
        while (self.busy or self.backlog) and time.perf_counter() < deadline:
            await asyncio.sleep(0.01)
        self.result.timeouts += len(self.busy) + len(self.backlog)
        for client in [*self.idle, *self.busy]:
            if client.transport is not None:
                client.transport.close()
        return self.result


async def open_loop(
    port: int, token: str, rate: float, seconds: float, timeout: float, connections: int = 256
) -> Result:
    """Requests due at ``rate`` per second for ``seconds``, whatever the answers do (:class:`OpenLoop`)."""
    return await OpenLoop(port, token, connections, timeout).run(rate, seconds)
