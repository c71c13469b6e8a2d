"""Rolling restarts under load: ``make serve``'s web process (gunicorn, WORKERS uvicorn workers)
restarted with ``kill -HUP`` of its master while 200 sessions call tools and GET streams
receive outbox events. Not a test: it prints figures.

What runs:

* gunicorn with ``--workers`` (2) uvicorn workers of the reference site on PostgreSQL
  (``DATABASE_URL``, default the ``h_sd_bench`` database) and Redis (``REDIS_URL``, default DB 5:
  cache and wake-ups), as ``make serve`` starts it;
* ``--sessions`` (200) 2025-11-25 sessions, each on its own keep-alive connection calling
  ``tools/call`` (echo) back to back for ``--seconds``;
* ``--streams`` (20) GET streams on other sessions, and a writer in this process adding one outbox
  row to each of them every ``--interval`` seconds (numbered);
* ``--restarts`` (2) rolling restarts (SIGHUP to the master) spread over the run;
* a readiness probe every 100 ms.

The clients behave like real HTTP clients: a request that got **no response byte** (the server
closed an idle keep-alive connection, or reset it, before answering) is sent again on a new
connection, as httpx does; nothing else is retried. A GET stream that ends reconnects after its
``retry:`` time with ``Last-Event-ID``. Printed: requests, retries, failures by kind (connection
refused / reset or closed mid-response / 5xx / other HTTP status / JSON-RPC error or tool error),
p50/p99 latency, readiness answers, and for the GET streams: reconnections, events written,
received, lost and duplicated.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_sd_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/restart.py [--sessions 200] [--seconds 40] [--restarts 2] [--drain-delay 3]

``--restarts 0`` is the baseline run (same load, no restart).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_sd_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/5")

from bench.loadgen import Connection, NoResponse, percentile  # noqa: E402
from bench.prod_topology import (  # noqa: E402
    INIT,
    REDIS_URL,
    call_body,
    django_setup,
    fixtures,
    free_port,
    gunicorn,
    mcp_headers,
)

CALL_ERRORS = (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError)


class Outcomes:
    """Counters of one run (one event loop: no locks)."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.failures: Counter[str] = Counter()
        self.retried: Counter[bool] = Counter()  # reused keep-alive connection? -> requests sent again
        self.readiness: Counter[str] = Counter()
        self.reconnects = 0
        self.stream_failures: Counter[str] = Counter()
        self.received: dict[str, list[int]] = {}
        self.elapsed = 0.0


async def send(conn: Connection, outcomes: Outcomes, method: str, headers: dict[str, str], body: bytes):
    """One request as an HTTP client sends it: again on a new connection (once) when the server
    closed or reset the connection before any byte of the response. :returns: the response, or
    None (the failure is counted)."""
    for attempt in (1, 2):
        reused = conn.writer is not None
        try:
            return await conn.request(method, "/mcp", headers, body)
        except NoResponse:
            await conn.close()
            if attempt == 2:
                outcomes.failures["no response twice"] += 1
                return None
            outcomes.retried[reused] += 1
        except ConnectionRefusedError:
            outcomes.failures["connection refused"] += 1
            return None
        except CALL_ERRORS as exc:
            await conn.close()
            outcomes.failures[f"cut mid-response ({type(exc).__name__})"] += 1
            return None
    return None


def judge(response, n: int, outcomes: Outcomes) -> None:
    if response.status >= 500:
        outcomes.failures[f"HTTP {response.status}"] += 1
        return
    if response.status != 200:
        outcomes.failures[f"HTTP {response.status}"] += 1
        return
    try:
        messages = response.json_messages()
    except ValueError:
        outcomes.failures["malformed body"] += 1
        return
    final = [m for m in messages if m.get("id") == n]
    if not final or "result" not in final[0]:
        outcomes.failures["JSON-RPC error"] += 1
    elif final[0]["result"].get("isError"):
        outcomes.failures["tool error"] += 1


async def session_loop(port: int, token: str, deadline: float, outcomes: Outcomes) -> None:
    conn = Connection("127.0.0.1", port)
    opened = await send(conn, outcomes, "POST", mcp_headers(token, version=False), json.dumps(INIT).encode())
    session = opened.headers.get("mcp-session-id") if opened is not None else None
    if session is None:
        outcomes.failures["initialize failed"] += 1
        return
    headers = mcp_headers(token, session)
    await send(conn, outcomes, "POST", headers, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    n = 0
    while time.monotonic() < deadline:
        n += 1
        started = time.perf_counter()
        response = await send(conn, outcomes, "POST", headers, call_body(n))
        if response is None:
            continue
        outcomes.latencies.append(time.perf_counter() - started)
        judge(response, n, outcomes)
    await conn.close()


async def read_chunked_sse(reader: asyncio.StreamReader):
    """SSE fields (name, value) of a chunked response body, until it ends."""
    buffer = b""
    while True:
        size_line = await reader.readline()
        if not size_line:
            raise ConnectionError("stream cut")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            await reader.readline()
            return
        buffer += await reader.readexactly(size)
        await reader.readexactly(2)
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            text = line.decode().rstrip("\r")
            if text and not text.startswith(":"):
                name, _, value = text.partition(":")
                yield name, value.lstrip(" ")
            elif not text:
                yield "", ""


async def stream_loop(port: int, token: str, session: str, stop: asyncio.Event, outcomes: Outcomes) -> None:
    """One GET stream, reconnected after each end with Last-Event-ID, until ``stop``."""
    received = outcomes.received.setdefault(session, [])
    last_id, retry_ms, first = "", 1000, True
    while not stop.is_set():
        if not first:
            outcomes.reconnects += 1
            await asyncio.sleep(retry_ms / 1000)
        first = False
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError as exc:
            outcomes.stream_failures[f"connect: {type(exc).__name__}"] += 1
            continue
        head = (
            f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            + (f"Last-Event-ID: {last_id}\r\n" if last_id else "")
            + "\r\n"
        )
        try:
            writer.write(head.encode())
            status = await reader.readline()
            if b" 200 " not in status:
                outcomes.stream_failures[f"status {status.decode().strip()[:40] or 'none'}"] += 1
                continue
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            stopper = asyncio.ensure_future(stop.wait())
            fields = read_chunked_sse(reader)
            while True:
                getter = asyncio.ensure_future(anext(fields))
                done, _ = await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if stopper in done:
                    getter.cancel()
                    break
                try:
                    name, value = getter.result()
                except StopAsyncIteration:
                    break
                if name == "id":
                    last_id = value
                elif name == "retry":
                    retry_ms = int(value)
                elif name == "data":
                    received.append(int(json.loads(value)["params"]["data"]))
            stopper.cancel()
        except CALL_ERRORS as exc:
            outcomes.stream_failures[f"cut: {type(exc).__name__}"] += 1
        finally:
            writer.close()


async def readiness_loop(port: int, stop: asyncio.Event, outcomes: Outcomes) -> None:
    while not stop.is_set():
        conn = Connection("127.0.0.1", port)
        try:
            response = await conn.request("GET", "/readyz", {})
            outcomes.readiness[str(response.status)] += 1
        except CALL_ERRORS as exc:
            outcomes.readiness[type(exc).__name__] += 1
        await conn.close()
        await asyncio.sleep(0.1)


def writer_thread(sessions: list[str], interval: float, stop: threading.Event, written: list[int]) -> None:
    """Outbox rows 1, 2, 3 … to every stream session, one round every ``interval`` seconds."""
    from django.db import connection

    from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message

    n = 0
    while not stop.is_set():
        n += 1
        for session in sessions:
            enqueue_session_message(
                session, {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": n}}
            )
        written.append(n)
        stop.wait(interval)
    connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--restarts", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between two rounds of outbox rows")
    parser.add_argument(
        "--drain-delay",
        type=float,
        default=0.0,
        help="MCP_DRAIN_DELAY_SECONDS of the workers: an old worker keeps accepting this long while new ones boot",
    )
    args = parser.parse_args()
    django_setup()
    fx = fixtures()
    port = free_port()
    server = gunicorn(
        "restart",
        args.workers,
        port,
        DB_POOL_MAX_SIZE="8",
        CELERY_BROKER_URL=REDIS_URL,
        MCP_DRAIN_DELAY_SECONDS=str(args.drain_delay),
    )
    server.wait_ready("/healthz")
    tokens = [fx["mint"]()[0] for _ in range(args.sessions)]
    stream_token, _ = fx["mint"]()
    outcomes = Outcomes()
    written: list[int] = []
    restarted: list[float] = []

    async def run() -> None:
        # stream sessions: opened through the server, as a client does
        conn = Connection("127.0.0.1", port)
        stream_sessions = []
        for _ in range(args.streams):
            opened = await conn.request(
                "POST", "/mcp", mcp_headers(stream_token, version=False), json.dumps(INIT).encode()
            )
            stream_sessions.append(opened.headers["mcp-session-id"])
        await conn.close()
        stop = asyncio.Event()
        streams = [asyncio.ensure_future(stream_loop(port, stream_token, s, stop, outcomes)) for s in stream_sessions]
        probes = asyncio.ensure_future(readiness_loop(port, stop, outcomes))
        await asyncio.sleep(1)  # streams open
        stop_writer = threading.Event()
        writer = threading.Thread(target=writer_thread, args=(stream_sessions, args.interval, stop_writer, written))
        writer.start()
        started = time.monotonic()
        deadline = started + args.seconds

        async def restarts() -> None:
            for k in range(args.restarts):
                await asyncio.sleep(started + args.seconds * (k + 1) / (args.restarts + 1) - time.monotonic())
                os.kill(server.process.pid, signal.SIGHUP)
                restarted.append(time.monotonic() - started)

        await asyncio.gather(*(session_loop(port, token, deadline, outcomes) for token in tokens), restarts())
        stop_writer.set()
        await asyncio.to_thread(writer.join)
        await asyncio.sleep(3)  # the last rows reach the streams
        stop.set()
        await asyncio.gather(*streams, probes)
        outcomes.elapsed = time.monotonic() - started

    cpu = server.cpu()  # of the process tree: an old worker's CPU leaves with it (printed without restarts only)
    try:
        asyncio.run(run())
    finally:
        used = server.cpu() - cpu
        log = server.log_text()
        server.stop()
    count = len(outcomes.latencies)
    failed = sum(outcomes.failures.values())
    print(
        f"\n== {args.sessions} sessions x {args.seconds:.0f}s tools/call on gunicorn ({args.workers} workers), "
        f"drain delay {args.drain_delay:g}s, {len(restarted)} rolling restart(s) (kill -HUP master at "
        + ", ".join(f"{t:.1f}s" for t in restarted)
        + ")"
    )
    print(
        f"   requests {count + failed}, answered {count} ({count / outcomes.elapsed:.0f}/s), "
        f"failed {failed} {dict(outcomes.failures) or ''}, sent again after no response: "
        f"{outcomes.retried[True]} (idle keep-alive connection) + {outcomes.retried[False]} (new connection), "
        f"p50 {1000 * percentile(outcomes.latencies, 0.5):.0f} ms, p99 {1000 * percentile(outcomes.latencies, 0.99):.0f} ms, "
        f"max {1000 * max(outcomes.latencies, default=0):.0f} ms"
        + (f", server CPU {1000 * used / max(count, 1):.2f} ms/request" if not restarted else "")
    )
    expected = set(written)
    lost = sum(len(expected - set(got)) for got in outcomes.received.values())
    duplicated = sum(len(got) - len(set(got)) for got in outcomes.received.values())
    print(
        f"   GET streams {args.streams}: events written {len(written) * args.streams}, received "
        f"{sum(len(got) for got in outcomes.received.values())}, lost {lost}, duplicated {duplicated}, "
        f"reconnections {outcomes.reconnects}, stream failures {dict(outcomes.stream_failures) or 0}"
    )
    print(f"   readiness probes: {dict(outcomes.readiness)}")
    errors = [line for line in log.splitlines() if "Traceback" in line or "ERROR" in line or "exceeded" in line]
    print(f"   server log: {len(errors)} error line(s)" + (": " + " | ".join(errors[:5]) if errors else ""))


if __name__ == "__main__":
    main()
