"""The health probes and what the health lane costs, side by side (not a test: prints figures).

Two servers of the reference site (gunicorn, 1 uvicorn worker each) on PostgreSQL and Redis:
``lane`` (``project.asgi``: the probes answered by :func:`mcp_oauth.health.health_lane` before
Django) and ``urlconf`` (``bench/nohealth_asgi.py``: the same application without the lane; the
probes go through Django's middleware to the views of ``mcp_oauth.urls``). Interleaved rounds of
``--connections`` keep-alive connections for ``--seconds`` each: ``/healthz``, ``/readyz``
(database, cache and broker checks) and ``tools/call`` echo (the lane's cost on every other
request). Prints req/s, p50/p99 and server CPU per request, and the ratios lane ÷ urlconf.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_sd_bench REDIS_URL=redis://127.0.0.1:6379/5 \\
        .venv/bin/python bench/probes.py [--seconds 5] [--rounds 3] [--connections 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_sd_bench")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/5")

from bench.loadgen import Connection, Tally, percentile, timed  # noqa: E402
from bench.prod_topology import REDIS_URL, django_setup, fixtures, free_port, gunicorn, run_calls  # noqa: E402


async def probe_loop(port: int, path: str, seconds: float, tally: Tally, bad: list[int]) -> None:
    conn = Connection("127.0.0.1", port)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        response = await timed(conn, tally, "GET", path, {})
        if response is None or response.status != 200:
            bad[0] += 1
    await conn.close()


async def run_probes(port: int, path: str, seconds: float, connections: int) -> tuple[Tally, int]:
    tally, bad = Tally(), [0]
    await asyncio.gather(*(probe_loop(port, path, seconds, tally, bad) for _ in range(connections)))
    return tally, bad[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    django_setup()
    fx = fixtures()
    token, _ = fx["mint"]()
    env = {"CELERY_BROKER_URL": REDIS_URL, "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    servers = {
        "lane": gunicorn("lane", 1, free_port(), **env),
        "urlconf": gunicorn("urlconf", 1, free_port(), app="bench.nohealth_asgi:application", **env),
    }
    loads = {
        "/healthz": lambda port: run_probes(port, "/healthz", args.seconds, args.connections),
        "/readyz": lambda port: run_probes(port, "/readyz", args.seconds, args.connections),
        "tools/call": lambda port: run_calls(port, token, "ours", args.seconds, args.connections),
    }
    totals = {(load, name): [Tally(), 0.0, 0.0, 0] for load in loads for name in servers}
    try:
        for server in servers.values():
            server.wait_ready()
        for server in servers.values():  # warm up
            asyncio.run(run_calls(server.port, token, "ours", 1.0, 4))
            asyncio.run(run_probes(server.port, "/readyz", 1.0, 4))
        names = list(servers)
        for round_ in range(args.rounds):
            for load, run in loads.items():
                for name in names[round_ % 2 :] + names[: round_ % 2]:
                    server = servers[name]
                    cpu, started = server.cpu(), time.monotonic()
                    tally, bad = asyncio.run(run(server.port))
                    entry = totals[(load, name)]
                    entry[0].merge(tally)
                    entry[1] += time.monotonic() - started
                    entry[2] += server.cpu() - cpu
                    entry[3] += bad + tally.errors
    finally:
        for server in servers.values():
            server.stop()
    print(
        f"\n== probes and tools/call, lane (health_lane) vs urlconf (views behind Django's middleware), "
        f"1 worker each, {args.connections} connections, {args.rounds} interleaved rounds x {args.seconds:g}s"
    )
    print(f"{'load':11} {'server':8} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'CPU ms/req':>11} {'not 200':>8}")
    rates = {}
    for (load, name), (tally, seconds, cpu, bad) in totals.items():
        count = len(tally.latencies)
        rates[(load, name)] = (count / seconds, 1000 * cpu / max(count, 1))
        print(
            f"{load:11} {name:8} {count / seconds:7.0f} {1000 * percentile(tally.latencies, 0.5):7.1f} "
            f"{1000 * percentile(tally.latencies, 0.99):7.1f} {1000 * cpu / max(count, 1):11.3f} {bad:8d}"
        )
    for load in loads:
        (rate, cpu), (base_rate, base_cpu) = rates[(load, "lane")], rates[(load, "urlconf")]
        print(f"{load}: lane / urlconf {rate / base_rate:.2f} x req/s, {cpu / base_cpu:.2f} x CPU per request")


if __name__ == "__main__":
    main()
