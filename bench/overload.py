"""Overload proof of the MCP endpoint (issue 30): capacity, then an open-loop burst of N x capacity.

Starts the reference site with ``python -m project.serve`` (``make serve``: gunicorn with 2
uvicorn workers, a Celery worker and beat; PostgreSQL ``DATABASE_URL``, Redis ``REDIS_URL``) on a
free port, mints a bearer token in the same database, then:

1. **knee** (``--knee``): closed-loop ``tools/call`` with 1, 2, 4 … ``--knee-max`` concurrent
   connections and the in-flight bound off: calls/s and p50/p99 at each step. The capacity knee
   is the smallest concurrency reaching 95 % of the best throughput; past it only latency grows.
   ``MCP_MAX_IN_FLIGHT`` (per worker) is set above that (see docs/how-to/load-shedding.md).
2. **capacity**: closed-loop ``tools/call`` (2026-07-28 stateless ``echo``) with ``--connections``
   connections for ``--capacity-seconds``: successful calls per second at saturation.
3. **overload**: open loop at ``--factor`` x capacity for ``--seconds`` (requests start on a
   fixed schedule, each on an idle keep-alive connection or a new one, whatever the answers
   do), while ``/readyz`` is probed every 0.2 s. Printed: offered and answered rates, statuses,
   successful calls/s (and its share of capacity), latency p50/p99/max, requests answered
   later than 1 s, timeouts (no answer within ``--timeout``), dropped connections, 503s without
   ``Retry-After`` or without a JSON-RPC error body, the ``/readyz`` statuses and worst latency.

Nothing is asserted (tests/test_overload_topology.py asserts the invariants on a shorter run).
Every database connection this process opened is closed at the end; the server's go with it.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_shed REDIS_URL=redis://127.0.0.1:6379/7 \\
        .venv/bin/python bench/overload.py [--knee] [--factor 5] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loadgen import Connection, percentile  # noqa: E402

DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_shed")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7")
ACCEPT = "application/json, text/event-stream"
MODERN_VERSION = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "overload", "version": "1"},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


class Site:
    """``python -m project.serve`` on a free port (its own process group), stopped with SIGTERM."""

    def __init__(
        self,
        *,
        port: int = 0,
        workers: int = 2,
        max_in_flight: str | None = None,
        cpus: str | None = None,
        **env: str,
    ) -> None:
        self.port = port or free_port()
        self.cpus = cpus
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": DATABASE_URL,
            "REDIS_URL": REDIS_URL,
            "CELERY_BROKER_URL": REDIS_URL,
            "CACHE_KEY_PREFIX": f"overload{self.port}",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "MCP_BASE_URL": self.base,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
            "WORKERS": str(workers),
            "DB_POOL_MAX_SIZE": "4",
            "DB_POOL_MAX_SIZE_CELERY": "1",
            "CELERY_CONCURRENCY": "1",
            "MCP_LOG_LEVEL": "ERROR",
            **env,
        }
        if max_in_flight is not None:
            self.env["MCP_MAX_IN_FLIGHT"] = max_in_flight
        self.log = tempfile.NamedTemporaryFile("w+", prefix="overload-serve-", suffix=".log", delete=False)
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> Site:
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        self.process = subprocess.Popen(
            [*pin, sys.executable, "-m", "project.serve"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"make serve exited: {self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the site did not get ready: {self.log_text()[-3000:]}")

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # serve stops its children (gunicorn, celery)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    def __enter__(self) -> Site:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mint_token(base: str) -> str:
    """A bearer token for ``base``/mcp, written in the site's database from this process (Django
    set up here on the same settings; its connections are closed before returning)."""
    os.environ.update(
        {
            "DATABASE_URL": DATABASE_URL,
            "REDIS_URL": REDIS_URL,
            "MCP_BASE_URL": base,
            "DJANGO_DEBUG": "0",
            "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
            "DB_POOL_MAX_SIZE": "1",
        }
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import secrets
    from datetime import timedelta

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    from mcp_oauth.signals import ensure_default_resource

    try:
        resource = ensure_default_resource()
        user, _ = get_user_model().objects.get_or_create(username="overload-bench")
        app, _ = get_application_model().objects.get_or_create(
            name="overload-bench",
            defaults={
                "client_type": "public",
                "authorization_grant_type": "authorization-code",
                "redirect_uris": "http://127.0.0.1/callback",
            },
        )
        raw = secrets.token_urlsafe(32)
        token = get_access_token_model()(
            user=user,
            application=app,
            scope="mcp",
            expires=timezone.now() + timedelta(hours=2),
            resource=[resource.uri],
        )
        set_token_value(token, raw)
        token.save()
        return raw
    finally:
        connections.close_all()


# --- load -----------------------------------------------------------------------------------


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


@dataclass
class Probes:
    statuses: dict[int | str, int] = field(default_factory=dict)
    worst: float = 0.0


async def probe_readyz(port: int, stop: asyncio.Event, probes: Probes, interval: float = 0.2) -> None:
    """GET /readyz every ``interval`` on a fresh connection (as an orchestrator's probe does)."""
    while not stop.is_set():
        started = time.perf_counter()
        connection = Connection("127.0.0.1", port)
        try:
            await connection.open()
            response = await asyncio.wait_for(connection.request("GET", "/readyz", {}), 5)
            key: int | str = response.status
        except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            key = "no answer"
        finally:
            await connection.close()
        probes.statuses[key] = probes.statuses.get(key, 0) + 1
        probes.worst = max(probes.worst, time.perf_counter() - started)
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass


async def overload(
    port: int, token: str, rate: float, seconds: float, timeout: float, connections: int = 256
) -> tuple[Result, Probes]:
    stop, probes = asyncio.Event(), Probes()
    prober = asyncio.create_task(probe_readyz(port, stop, probes))
    try:
        result = await open_loop(port, token, rate, seconds, timeout, connections)
    finally:
        stop.set()
        await prober
    return result, probes


def run(coroutine):
    """``asyncio.run`` on uvloop when installed (uvicorn's loop: a leaner load generator)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def summary(result: Result) -> str:
    lat = result.latencies
    return (
        f"sent {result.sent}, answered {len(lat)}, ok {result.ok} ({result.ok / result.seconds:.0f}/s), "
        f"statuses {dict(sorted(result.statuses.items()))}, p50 {percentile(lat, 0.5) * 1000:.1f} ms, "
        f"p99 {percentile(lat, 0.99) * 1000:.1f} ms, max {max(lat, default=0) * 1000:.1f} ms, "
        f"late>1s {result.late}, timeouts {result.timeouts}, dropped {result.dropped}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--knee", action="store_true", help="first find the capacity knee (bound off)")
    parser.add_argument("--knee-max", type=int, default=256)
    parser.add_argument("--knee-seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=32, help="capacity: closed-loop connections")
    parser.add_argument("--capacity-seconds", type=float, default=10)
    parser.add_argument("--factor", type=float, default=5)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--open-connections", type=int, default=256, help="overload: keep-alive connections")
    parser.add_argument("--timeout", type=float, default=10, help="a request unanswered this long is a timeout")
    parser.add_argument("--max-in-flight", default=None, help="MCP_MAX_IN_FLIGHT of the site (default: the setting's)")
    parser.add_argument(
        "--pin",
        default="0:1" if (os.cpu_count() or 1) >= 2 else "",
        help="SERVER_CPUS:CLIENT_CPUS (taskset lists): the site and this load generator on separate cores, "
        "so that the generator's CPU does not eat the capacity it measures ('' : no pinning)",
    )
    args = parser.parse_args()
    server_cpus = client_cpus = None
    if args.pin:
        server_cpus, client_cpus = args.pin.split(":")
        os.sched_setaffinity(0, {int(c) for c in client_cpus.split(",")})
        print(f"site on CPU {server_cpus}, load generator on CPU {client_cpus}")

    port = free_port()  # one port for both sites: the token's resource is BASE_URL/mcp
    if args.knee:
        with Site(port=port, max_in_flight="none", cpus=server_cpus) as site:
            token = mint_token(site.base)
            print("knee (in-flight bound off): concurrency -> calls/s, p50, p99")
            best, rows, concurrency = 0.0, [], 1
            while concurrency <= args.knee_max:
                result = run(closed_loop(site.port, token, concurrency, args.knee_seconds))
                rate = result.ok / result.seconds
                best = max(best, rate)
                rows.append((concurrency, rate))
                print(
                    f"  {concurrency:4d}: {rate:7.0f}/s  p50 {percentile(result.latencies, 0.5) * 1000:7.1f} ms"
                    f"  p99 {percentile(result.latencies, 0.99) * 1000:7.1f} ms  statuses {result.statuses}"
                )
                concurrency *= 2
            knee = next(c for c, rate in rows if rate >= 0.95 * best)
            print(f"knee: {knee} concurrent requests (~{knee / 2:.0f} per worker) reach 95 % of {best:.0f}/s")

    with Site(port=port, max_in_flight=args.max_in_flight, cpus=server_cpus) as site:
        token = mint_token(site.base)
        run(closed_loop(site.port, token, 8, 2))  # warm-up: connections, caches
        result = run(closed_loop(site.port, token, args.connections, args.capacity_seconds))
        capacity = result.ok / result.seconds
        print(
            f"capacity ({args.connections} closed-loop connections, {args.capacity_seconds:.0f} s): {capacity:.0f} calls/s"
        )
        print(f"  {summary(result)}")
        rate = capacity * args.factor
        result, probes = run(overload(site.port, token, rate, args.seconds, args.timeout, args.open_connections))
        print(f"overload: open loop at {args.factor:g} x capacity = {rate:.0f} req/s offered for {args.seconds:.0f} s")
        print(f"  {summary(result)}")
        print(
            f"  successful {result.ok / result.seconds:.0f}/s = {result.ok / result.seconds / capacity:.0%} of capacity; "
            f"other 5xx {result.other_5xx}; 503 without Retry-After/JSON-RPC body {result.bad_503}; "
            f"429 without Retry-After {result.bad_429}"
        )
        print(f"  /readyz: {probes.statuses}, worst {probes.worst * 1000:.0f} ms")


if __name__ == "__main__":
    main()
