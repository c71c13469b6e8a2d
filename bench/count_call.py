"""Instructions per warm ``tools/call``, counted by callgrind: repeatable on a noisy machine.

Runs ``bench/profile_call.py --no-profile`` under ``valgrind --tool=callgrind`` twice per case,
with ``--calls`` ``N1`` and ``N2`` (16 concurrent calls on one event loop, against PostgreSQL and
Redis as ``bench/prod_topology.py`` configures them, ``PYTHONHASHSEED=0``), and prints
``(instructions(N2) - instructions(N1)) / (N2 - N1)``: the cost of one more call, start-up and
warm-up taken out. Cases: the 2025-11-25 session call (``legacy``) and the 2026-07-28 stateless
call (``modern``), for this tree and for every ``--source`` tree (an earlier checkout, e.g.
``git archive <commit> | tar -x -C /tmp/base``). Each callgrind run takes 1-2 minutes; the
cases run ``--jobs`` at a time, each job on a database of its own (``<DATABASE_URL's name>_cg<n>``,
created when missing): a run's fixtures change its bench user, which invalidates every cached
token of that user, and would send a concurrent run's calls to the database.

    .venv/bin/python bench/count_call.py [--source /tmp/base] [--n1 160] [--n2 800] [--jobs 2] [--concurrency 16] [--observed]

``--observed``: every tree with tracing (every request sampled, exported over OTLP/HTTP to a sink this
script runs on loopback, outside the counted process), the Prometheus metrics (multiprocess mode,
a fresh ``PROMETHEUS_MULTIPROC_DIR`` per run) and the tool-call audit trail all on, as
``bench/observed_asgi.py`` configures the site (all off, as ``bench/observability_overhead.py``'s
``ours``: no ``--observed`` and ``MCP_TOOL_CALL_AUDIT=0`` in the environment). The
batching intervals are stretched by callgrind's slowdown (about 50x), so that a batch holds as many
spans or rows as at full speed, where a worker serves hundreds of calls a second: a span batch is
full (512) before ``OTEL_BSP_SCHEDULE_DELAY``, an audit batch holds ~100 rows
(``TOOL_CALL_AUDIT_FLUSH_MILLISECONDS`` 10 s instead of 200 ms); with the real intervals a run
under callgrind writes a batch every few calls and counts the per-batch work ~50 times over. The
periodic metric export (once a minute) is left out (``OTEL_METRIC_EXPORT_INTERVAL``: one hour).

``--embedded``: the embedded shape instead (``make run``: SQLite, no Redis; the token cache is
each process's ``LocMemCache``); ``--settings JSON``: Django settings for this tree's runs (see
``bench/profile_call.py``'s ``BENCH_SETTINGS``), e.g. ``'{"MCP_OAUTH": {"REVOCATION_CHECK_SECONDS": 0}}'``.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.prod_topology import DATABASE_URL  # noqa: E402


def job_database(n: int) -> str:
    """The URL of job ``n``'s database, created when missing."""
    parts = urlsplit(DATABASE_URL)
    name = f"{parts.path.lstrip('/')}_cg{n}"
    with psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
    return urlunsplit(parts._replace(path=f"/{name}"))


def embedded_database(n: int) -> str:
    """Job ``n``'s SQLite file (``--embedded``), fresh."""
    path = Path(tempfile.gettempdir()) / f"count_call_embedded_{os.getpid()}_{n}.sqlite3"
    path.unlink(missing_ok=True)
    return f"sqlite:///{path}"


def observed_env() -> dict[str, str]:
    """The environment of an all-on run (see ``--observed``), with the OTLP/HTTP sink started here:
    the spans are really encoded and sent, and decoded in this process, not the counted one."""
    from bench.tracing_overhead import Sink

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "OTEL_SERVICE_NAME": "mcp-oauth-bench",
        "OTEL_BSP_SCHEDULE_DELAY": "250000",
        "OTEL_METRIC_EXPORT_INTERVAL": "3600000",
        "MCP_METRICS": "1",
        "MCP_TOOL_CALL_AUDIT": "1",
        "BENCH_SETTINGS": json.dumps({"MCP_OAUTH": {"TOOL_CALL_AUDIT_FLUSH_MILLISECONDS": 10_000}}),
    }


def count(
    source: Path,
    modern: bool,
    calls: int,
    database_url: str = DATABASE_URL,
    concurrency: int = 16,
    extra_env: dict[str, str] | None = None,
) -> int:
    """Instructions callgrind collected for one run of ``calls`` calls served by ``source``."""
    with tempfile.TemporaryDirectory() as folder:
        observed = extra_env is not None and extra_env.get("MCP_METRICS") == "1"
        if observed:  # each run its own metrics files
            os.mkdir(f"{folder}/metrics")
            extra_env = {**extra_env, "PROMETHEUS_MULTIPROC_DIR": f"{folder}/metrics"}
        argv = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={folder}/out",
            sys.executable,
            str(ROOT / "bench" / "profile_call.py"),
            "--no-profile",
            "--calls",
            str(calls),
            "--concurrency",
            str(concurrency),
            "--source",
            str(source),
        ] + (["--modern"] if modern else [])
        env = {
            **os.environ,
            "PYTHONHASHSEED": "0",
            "PYTHONPATH": str(source),
            "DATABASE_URL": database_url,
            # the job's cache keys apart from other jobs' (trees whose bench reads it)
            "BENCH_CACHE_KEY_PREFIX": "bench_" + urlsplit(database_url).path.lstrip("/"),
            **(extra_env or {}),
        }
        run = subprocess.run(argv, env=env, cwd=source, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind run failed ({source}, modern={modern}): {run.stderr[-2000:]}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", default=[], help="another source tree to count (repeatable)")
    parser.add_argument("--n1", type=int, default=160)
    parser.add_argument("--n2", type=int, default=800)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent calls on the event loop")
    parser.add_argument(
        "--embedded", action="store_true", help="the embedded shape: SQLite, no Redis (the token cache is LocMem)"
    )
    parser.add_argument("--settings", default="", help="BENCH_SETTINGS (JSON) for this tree's runs only")
    parser.add_argument(
        "--observed", action="store_true", help="tracing (OTLP/HTTP to a loopback sink), metrics and audit trail on"
    )
    args = parser.parse_args()
    sources = [ROOT] + [Path(s).resolve() for s in args.source]
    cases = [(source, modern, n) for source in sources for modern in (False, True) for n in (args.n1, args.n2)]
    databases: queue.Queue[str] = queue.Queue()
    for n in range(args.jobs):
        databases.put(embedded_database(n) if args.embedded else job_database(n))
    shape_env = {"REDIS_URL": "", "CELERY_BROKER_URL": "", "MCP_WAKEUP_URL": ""} if args.embedded else {}
    if args.observed:
        shape_env.update(observed_env())

    def one(case: tuple[Path, bool, int]) -> int:
        database_url = databases.get()
        extra = dict(shape_env)
        if case[0] == ROOT and args.settings:  # merged with --observed's
            mine = json.loads(args.settings)
            theirs = json.loads(extra.get("BENCH_SETTINGS", "{}"))
            mine["MCP_OAUTH"] = {**theirs.get("MCP_OAUTH", {}), **mine.get("MCP_OAUTH", {})}
            extra["BENCH_SETTINGS"] = json.dumps(mine)
        try:
            return count(*case, database_url=database_url, concurrency=args.concurrency, extra_env=extra)
        finally:
            databases.put(database_url)

    with ThreadPoolExecutor(args.jobs) as pool:
        totals = dict(zip(cases, pool.map(one, cases), strict=True))
    print(
        f"\n== instructions per warm tools/call (callgrind; ({args.n2} calls - {args.n1} calls) / {args.n2 - args.n1}, "
        f"{args.concurrency} concurrent)"
    )
    per_call: dict[tuple[Path, bool], float] = {}
    for source in sources:
        for modern in (False, True):
            per_call[(source, modern)] = (totals[(source, modern, args.n2)] - totals[(source, modern, args.n1)]) / (
                args.n2 - args.n1
            )
        legacy, modern_count = per_call[(source, False)], per_call[(source, True)]
        print(
            f"{str(source):40} 2025-11-25 session {legacy:12,.0f}   2026-07-28 stateless {modern_count:12,.0f}   "
            f"modern / legacy {modern_count / legacy:.3f} x"
        )
    for source in sources[1:]:
        for modern, label in ((False, "2025-11-25"), (True, "2026-07-28")):
            print(f"{label}: this tree / {source}: {per_call[(ROOT, modern)] / per_call[(source, modern)]:.3f} x")


if __name__ == "__main__":
    main()
