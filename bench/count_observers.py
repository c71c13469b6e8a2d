"""Instructions per request of the three observers alone (tracing, metrics, audit trail), counted by
callgrind: what "all on" adds to a ``tools/call``, without the rest of the request around it.

Each run sets Django up (no migration, no request), then calls ``start`` and ``finish`` of the
tracing, metrics and audit observers ``N`` times as :meth:`~mcp_oauth.mcp_server.transport.table.
MethodTable.serve` does, with a real ``Call`` of a known tool (2026-07-28, stateless): the SDK's
span with its attributes made current and ended, the ``mcp.server.operation.duration`` histogram,
the Prometheus counter and histogram in multiprocess mode, the audit entry queued. The spans are
exported when the process ends (``OTEL_BSP_SCHEDULE_DELAY`` long: batches of 512, as at full
speed) over OTLP/HTTP to a sink this script runs on loopback (outside the counted process), so the
batch thread's encoding and POSTs are counted; ``--writer`` adds the audit writer's preparation of
each row (digest, row tuple; the ``COPY`` itself is left out). Prints
``(instructions(N2) - instructions(N1)) / (N2 - N1)`` per tree::

    .venv/bin/python bench/count_observers.py [--source /tmp/base] [--n1 200] [--n2 1000] [--writer]

The database of ``DATABASE_URL`` must be migrated (nothing is written to it).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent


def child(n: int, writer: bool) -> None:
    """The counted process: ``n`` requests through the observers (and ``n`` rows prepared)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from mcp_oauth.mcp_server.transport import table
    from mcp_oauth.observability import audit_trail, metrics, metrics_receivers, tracing_runtime

    metrics.configure()
    registry = SimpleNamespace(get=lambda name: object() if name == "echo" else None)
    principal = SimpleNamespace(
        user=SimpleNamespace(pk=7),
        application=SimpleNamespace(client_id="c1"),
        resource=SimpleNamespace(uri="https://r.example/mcp"),
        client_id="c1",
        organization=None,
    )
    queued: list = []
    audit = audit_trail.AuditTrailObserver(SimpleNamespace(put=queued.append))  # type: ignore[arg-type]
    watchers = (tracing_runtime.OBSERVER, metrics_receivers.observer, audit)
    entry = SimpleNamespace(name_param="name")
    for i in range(n):
        call = table.Call(
            method="tools/call",
            message_id=i,
            params={"name": "echo", "arguments": {"text": f"hi {i}"}, "_meta": {"protocolVersion": "2026-07-28"}},
            principal=principal,  # type: ignore[arg-type]
            registry=registry,
            era="modern",
            protocol_version="2026-07-28",
        )
        message = {"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": "hi"}]}}
        started_at, began = time.time(), time.perf_counter()
        tokens = [table._start(observer, call) for observer in watchers]
        table._finish(watchers, tokens, entry, call, began, started_at, message, 200)  # type: ignore[arg-type]
    if writer:
        audit_trail._insert = lambda rows: None  # type: ignore[assignment]
        audit_trail._touch_last_used = lambda calls: None  # type: ignore[assignment]
        trail = audit_trail.TrailWriter()
        for start in range(0, len(queued), 100):
            trail._write(queued[start : start + 100])


def count(source: Path, n: int, endpoint: str, writer: bool) -> int:
    with tempfile.TemporaryDirectory() as folder:
        os.mkdir(f"{folder}/metrics")
        env = {
            **os.environ,
            "PYTHONHASHSEED": "0",
            "PYTHONPATH": str(source),
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_SERVICE_NAME": "mcp-oauth-bench",
            "OTEL_BSP_SCHEDULE_DELAY": "250000",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",
            "MCP_METRICS": "1",
            "MCP_TOOL_CALL_AUDIT": "1",
            "PROMETHEUS_MULTIPROC_DIR": f"{folder}/metrics",
        }
        argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/out", sys.executable]
        argv += [str(ROOT / "bench" / "count_observers.py"), "--child", str(n)] + (["--writer"] if writer else [])
        run = subprocess.run(argv, env=env, cwd=source, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : (\d+)", run.stderr)
        if run.returncode != 0 or found is None:
            raise RuntimeError(f"callgrind run failed ({source}, {n}): {run.stderr[-2000:]}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", action="append", default=[], help="another source tree (repeatable)")
    parser.add_argument("--n1", type=int, default=200)
    parser.add_argument("--n2", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--writer", action="store_true", help="also the audit writer's preparation of each row")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.writer)
        return
    sys.path.insert(0, str(ROOT))
    from bench.tracing_overhead import Sink

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    sources = [ROOT] + [Path(s).resolve() for s in args.source]
    cases = [(source, n) for source in sources for n in (args.n1, args.n2)]
    with ThreadPoolExecutor(args.jobs) as pool:
        totals = dict(zip(cases, pool.map(lambda c: count(c[0], c[1], endpoint, args.writer), cases), strict=True))
    server.shutdown()
    print(f"\n== instructions per request through the three observers (callgrind; ({args.n2} - {args.n1}) requests)")
    for source in sources:
        per = (totals[(source, args.n2)] - totals[(source, args.n1)]) / (args.n2 - args.n1)
        print(f"{str(source):40} {per:12,.0f}")


if __name__ == "__main__":
    main()
