"""CPU cost of the tool-call audit trail, in this process: the request path and the writer.

* the request path: ``start`` + ``finish`` of the trail's observer for one ``tools/call`` (the
  queue's append), in nanoseconds of CPU per call;
* the writer's thread: one batch of ``--batch`` calls turned into rows and inserted (``COPY`` on
  PostgreSQL, ``bulk_create`` elsewhere) with its last-used update, in microseconds of CPU per row
  (this process's CPU; the database's own is not counted).

Side by side with the official SDK server under load: ``MCP_TOOL_CALL_AUDIT=1`` and ``=0`` runs of
``bench/prod_topology.py --only compare`` (the reference site reads that variable). Not a test.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python bench/audit_overhead.py
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=500)
    options = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from mcp_oauth.mcp_server.transport.observers import McpRequestEvent
    from mcp_oauth.models import ToolCallRecord
    from mcp_oauth.observability.audit_trail import AuditTrailObserver, TrailWriter

    call_command("migrate", verbosity=0, interactive=False)
    writer = TrailWriter()
    writer._thread = object()  # type: ignore[assignment]  # no thread: the queue alone
    observer = AuditTrailObserver(writer)
    principal = SimpleNamespace(
        user=SimpleNamespace(pk=None),
        application=SimpleNamespace(client_id="bench-overhead"),
        resource=SimpleNamespace(uri="http://bench/mcp"),
    )
    call = SimpleNamespace(
        method="tools/call",
        principal=principal,
        http_request=SimpleNamespace(META={}),
        params={"name": "echo", "arguments": {"text": "hello"}},
        era="modern",
        protocol_version="2026-07-28",
    )
    event = McpRequestEvent(call, "echo", "ok", None, 0.001, time.time(), None, 200)  # type: ignore[arg-type]
    started = time.thread_time()
    for _ in range(options.calls):
        observer.finish(observer.start(call), event)
        if len(writer._queue) >= 5000:
            writer._queue.clear()
    per_call = (time.thread_time() - started) * 1e9 / options.calls
    print(f"request path (observer start + finish): {per_call:,.0f} ns CPU per call")
    writer._queue.clear()
    for round_ in range(4):
        batch = [writer_entry(n) for n in range(options.batch)]
        started = time.thread_time()
        writer._write(batch)
        per_row = (time.thread_time() - started) * 1e6 / options.batch
        if round_:  # the first batch warms the connection and the statement
            print(f"writer thread ({writer_vendor()}): {per_row:.1f} us CPU per row, batches of {options.batch}")
    ToolCallRecord.objects.filter(client_id="bench-overhead").delete()


def writer_entry(n: int) -> tuple:
    return (
        time.time(),
        None,
        "bench-overhead",
        "http://bench/mcp",
        "echo",
        "tools/call",
        "modern",
        "2026-07-28",
        "ok",
        None,
        0.001,
        {"text": "hello", "n": n},
        "",
    )


def writer_vendor() -> str:
    from django.db import connection

    return connection.vendor


if __name__ == "__main__":
    main()
