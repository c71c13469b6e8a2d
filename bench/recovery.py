"""Recovery after a dependency cut, on the production topology: figures to quote. Not a test
(tests/topology/test_recovery_cut.py asserts on the same runs).

``python -m project.serve`` (gunicorn with 2 uvicorn workers, a Celery worker, beat) runs with
PostgreSQL and Redis each behind a TCP forwarder (``tests/support/tcp_forwarder.py``). For each scenario
20 clients call ``tools/call`` (half 2025-11-25 sessions, half 2026-07-28 stateless; every other
request reads the protected-resource metadata, which reads the database) and a readiness probe
runs every 100 ms, while one forwarder is stopped for ``--cut`` seconds (every open connection
closed, new ones refused) and started again (``tests/support/recovery_load.py``):

``postgres``  PostgreSQL cut under load;
``idle``      PostgreSQL cut with no load (the pools idle through it), then 20 sequential metadata
              reads and 20 readiness probes 5 s after the return (the operator's case);
``redis``     Redis cut under load (cache, broker and wake-ups).

Printed per scenario: calls, errors during the cut (by status; 503s without ``Retry-After``),
errors of requests sent after the return, errors answered 0–5 s and more than 5 s after the
return, the time from the return to the first successful call, readiness probes and their flaps
after the return, and from when readiness was steady 200.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_recovery REDIS_URL=redis://127.0.0.1:6379/2 \\
        .venv/bin/python bench/recovery.py [--only postgres,idle,redis] [--cut 5] [--clients 20]

About 25 s per scenario plus the topology's start (~20 s); at most ~16 PostgreSQL connections.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_recovery")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/2")

import httpx2  # noqa: E402

from bench.prod_topology import BASE, django_setup, fixtures, free_port  # noqa: E402
from tests.support.recovery_load import idle_cut, run_cut  # noqa: E402
from tests.support.tcp_forwarder import TcpForwarder  # noqa: E402


def through(url: str, forwarder: TcpForwarder) -> str:
    parts = urlsplit(url)
    user = f"{parts.username}@" if parts.username else ""
    return urlunsplit((parts.scheme, f"{user}127.0.0.1:{forwarder.port}", parts.path, parts.query, ""))


def serve(database: TcpForwarder, redis: TcpForwarder, port: int, log: Path) -> subprocess.Popen:
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "USER")},
        "DATABASE_URL": through(os.environ["DATABASE_URL"], database),
        "REDIS_URL": through(os.environ["REDIS_URL"], redis),
        "CACHE_KEY_PREFIX": "bench-recovery",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "MCP_BASE_URL": BASE,  # the token audience of bench.prod_topology's fixtures
        "WORKERS": "2",
        "DB_POOL_MAX_SIZE": "4",
        "DB_POOL_MAX_SIZE_CELERY": "1",
        "CELERY_CONCURRENCY": "1",
        "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
        "DJANGO_SECRET_KEY": "bench-secret-" + "k" * 40,
        "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
        "MCP_REQUEST_STATE_KEYS": "bench-recovery-request-state-" + "y" * 30,
        "MCP_THROTTLE_RATES": json.dumps({"token": None, "register": None, "authorize": None}),
    }
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "project.serve"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(log.read_text()[-3000:])
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return process
        except httpx2.HTTPError:
            pass
        time.sleep(0.25)
    stop(process)
    raise RuntimeError("the topology did not become ready:\n" + log.read_text()[-3000:])


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=40)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="postgres,idle,redis")
    parser.add_argument("--cut", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--settle", type=float, default=5.0, help="idle: seconds after the return before the requests")
    args = parser.parse_args()
    django_setup()
    token, _ = fixtures()["mint"]()
    from django.db import connection

    connection.close()
    database_port = urlsplit(os.environ["DATABASE_URL"]).port or 5432
    redis_port = urlsplit(os.environ["REDIS_URL"]).port or 6379
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="bench-recovery-", suffix=".log")[1])
    with TcpForwarder(database_port) as database, TcpForwarder(redis_port) as redis:
        process = serve(database, redis, port, log)
        try:
            for scenario in args.only.split(","):
                if scenario == "idle":
                    statuses = idle_cut(base, database, cut_seconds=args.cut, settle=args.settle)
                    print(
                        f"idle: {args.settle} s after the return, metadata",
                        {s: statuses["metadata"].count(s) for s in set(statuses["metadata"])},
                        "readiness",
                        {s: statuses["readiness"].count(s) for s in set(statuses["readiness"])},
                        flush=True,
                    )
                    continue
                forwarder = database if scenario == "postgres" else redis
                figures = run_cut(base, token, forwarder, clients=args.clients, cut_seconds=args.cut, after_seconds=10)
                print(f"{scenario}:", json.dumps(figures.summary()), flush=True)
        finally:
            stop(process)
    print(f"(topology log: {log})")


if __name__ == "__main__":
    main()
