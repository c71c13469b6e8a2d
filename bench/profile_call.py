"""Profile of the MCP endpoint's ``tools/call`` in one process (no network): where the CPU goes.

Drives ``project.asgi.application`` (the lean lane) directly with ASGI messages, C calls at a
time on one event loop, against PostgreSQL and Redis as ``bench/prod_topology.py`` configures
them, under cProfile; prints calls per second and the top functions by cumulative and own time.

    .venv/bin/python bench/profile_call.py [--calls 2000] [--concurrency 16] [--top 40] [--no-profile] [--modern]

``--modern``: 2026-07-28 stateless calls (``_meta`` envelope, no session) instead of a 2025-11-25 session's.
``BENCH_SETTINGS`` (environment, JSON): Django settings to override once set up (``MCP_OAUTH`` is
merged into the site's), e.g. the revocation options of a token cache that is not shared.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import asgi_post  # noqa: E402
from bench.prod_topology import (  # noqa: E402
    INIT,
    call_body,
    django_setup,
    fixtures,
    mcp_headers,
    modern_call_body,
    modern_headers,
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--no-profile", action="store_true", help="only the CPU time per call, without cProfile")
    parser.add_argument("--modern", action="store_true", help="2026-07-28 stateless calls")
    parser.add_argument("--dump", default="", help="also write the cProfile statistics to this file (pstats)")
    parser.add_argument("--source", default="", help="serve this source tree (an earlier checkout) instead")
    args = parser.parse_args()
    if args.source:  # before Django is set up: its packages are imported from there
        source = Path(args.source).resolve()
        sys.path.insert(0, str(source))
        os.chdir(source)  # Celery's app loading puts the working directory first on sys.path
    django_setup()
    overrides = json.loads(os.environ.get("BENCH_SETTINGS") or "{}")
    if overrides:  # e.g. {"MCP_OAUTH": {"REVOCATION_CHECK_SECONDS": 0}} (merged), {"CACHES": {...}}
        from django.conf import settings
        from django.test.utils import override_settings

        merged = {
            name: {**getattr(settings, name), **value} if isinstance(value, dict) and name == "MCP_OAUTH" else value
            for name, value in overrides.items()
        }
        override_settings(**merged).enable()
    fx = fixtures()
    token, _ = fx["mint"]()
    from project.asgi import application

    async def run() -> float:
        status, headers, _ = await asgi_post(
            application, "/mcp", mcp_headers(token, version=False), json.dumps(INIT).encode()
        )
        assert status == 200, status
        session_headers = mcp_headers(token, headers["mcp-session-id"])
        body = call_body
        if args.modern:
            session_headers, body = modern_headers(token), modern_call_body
        for n in range(50):  # warm
            await asgi_post(application, "/mcp", session_headers, body(n))
        per = args.calls // args.concurrency

        async def worker() -> None:
            for n in range(per):
                status, _, _ = await asgi_post(application, "/mcp", session_headers, body(n))
                assert status == 200, status

        if args.no_profile:
            cpu, main, started = time.process_time(), time.thread_time(), time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            cpu, elapsed = time.process_time() - cpu, time.perf_counter() - started
            main = time.thread_time() - main
            calls = per * args.concurrency
            print(
                f"{calls / elapsed:.0f} calls/s in one process, {1000 * cpu / calls:.3f} ms CPU per call "
                f"({1000 * main / calls:.3f} ms on the event loop's thread, {1000 * (cpu - main) / calls:.3f} ms "
                "on other threads: exporters, the audit writer, sync_to_async)"
            )
            return elapsed
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        profile.disable()
        elapsed = time.perf_counter() - started
        print(
            f"{per * args.concurrency / elapsed:.0f} calls/s in one process under cProfile "
            f"({1000 * elapsed / (per * args.concurrency):.2f} ms per call)"
        )
        stats = pstats.Stats(profile)
        if args.dump:
            stats.dump_stats(args.dump)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
        return elapsed

    asyncio.run(run())


if __name__ == "__main__":
    main()
