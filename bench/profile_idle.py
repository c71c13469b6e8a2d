"""Memory of idle GET streams in one process (no network): what each stream keeps alive.

Opens N session GET streams on ``project.asgi.application`` (the lean lane) with ASGI messages,
against PostgreSQL and Redis as ``bench/prod_topology.py`` configures them, lets them settle,
then prints the Python heap per stream (tracemalloc) and the top allocation sites.

    .venv/bin/python bench/profile_idle.py [--streams 300] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import http_scope  # noqa: E402
from bench.prod_topology import BASE, _session_for, django_setup, fixtures, mcp_headers  # noqa: E402


def _rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    django_setup()
    fx = fixtures()
    token, row = fx["mint"]()
    from asgiref.sync import sync_to_async
    from django.db import connection

    from project.asgi import application

    async def open_stream(session: str, opened: asyncio.Event, done: asyncio.Event) -> None:
        headers = {**mcp_headers(token, session), "Accept": "text/event-stream"}
        scope = http_scope("GET", "/mcp", headers, BASE.split("//", 1)[1])
        sent = False

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.body":
                opened.set()

        await application(scope, receive, send)

    async def run() -> None:
        sessions = [await sync_to_async(_session_for)(fx, row) for _ in range(args.streams + 1)]
        done = asyncio.Event()
        first = asyncio.Event()
        warm = asyncio.create_task(open_stream(sessions[0], first, done))
        await first.wait()
        await asyncio.sleep(1)
        gc.collect()
        rss_before = _rss_kb()
        tracemalloc.start(12)
        before = tracemalloc.take_snapshot()
        events = [asyncio.Event() for _ in sessions[1:]]
        tasks = [asyncio.create_task(open_stream(s, e, done)) for s, e in zip(sessions[1:], events, strict=True)]
        for event in events:
            await event.wait()
        for _ in range(120):  # settled: no task but the streams' own (their first reads are done)
            await asyncio.sleep(0.5)
            if len(asyncio.all_tasks()) <= len(tasks) + 4:
                break
        await asyncio.sleep(1)
        gc.collect()
        after = tracemalloc.take_snapshot()
        stats = after.compare_to(before, "traceback")
        total = sum(stat.size_diff for stat in stats)
        print(
            f"{args.streams} idle streams: {total / args.streams / 1024:.1f} KB of Python heap per stream, "
            f"{(_rss_kb() - rss_before) / args.streams:.1f} KB of RSS (with tracemalloc's own)"
        )
        for stat in after.compare_to(before, "lineno")[: args.top]:
            print(f"{stat.size_diff / args.streams:8.0f} B/stream  {stat.traceback[0]}")
        done.set()
        await asyncio.gather(warm, *tasks, return_exceptions=True)

    connection.close()  # this thread's connection goes back: the streams' reads need the pool's
    asyncio.run(run())


if __name__ == "__main__":
    main()
