"""Export of the tool-call audit trail in bounded memory: 1,000,000 rows on PostgreSQL.

Inserts ``--rows`` (1,000,000) ToolCallRecord rows with ``COPY`` (tagged with a client_id of its
own), then runs ``manage.py export_tool_calls`` in a child process for each format, and a child that
exports nothing (``--client`` matching no row) as the baseline; prints the rows written, the time and
the child's peak RSS (``ru_maxrss``), then deletes its rows. Not a test: nothing is asserted.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> .venv/bin/python bench/audit_export.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAG = "bench-audit-export"


def child_peak(argv: list[str]) -> tuple[float, float]:
    """Run ``argv``; :returns: (seconds, the child's peak RSS in MiB), via wait4's rusage."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv} failed")
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    options = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("Set DATABASE_URL to a PostgreSQL database (COPY).")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DB_STATEMENT_TIMEOUT_MS", "600000")  # the COPY of a million rows (children too)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from mcp_oauth.models import ToolCallRecord

    call_command("migrate", verbosity=0, interactive=False)
    table = ToolCallRecord._meta.db_table
    columns = (
        "created_at, client_id, resource, tool, method, era, protocol_version, outcome, duration_ms, "
        "arguments_digest, trace_id"
    )
    start = datetime(2026, 1, 1, tzinfo=UTC)
    began = time.perf_counter()
    with connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg 3
        with raw.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for n in range(options.rows):
                copy.write_row(
                    (
                        start + timedelta(seconds=n),
                        TAG,
                        "https://mcp.example.com/mcp",
                        f"tool-{n % 20}",
                        "tools/call",
                        "modern",
                        "2026-07-28",
                        "ok" if n % 50 else "tool_error",
                        1.25,
                        f"{n:064x}",
                        "",
                    )
                )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {table}")  # as autovacuum would: the planner walks the primary key
    inserted = time.perf_counter() - began
    print(f"inserted {options.rows:,} rows with COPY (and ANALYZE) in {inserted:.1f} s")
    manage = [sys.executable, "manage.py", "export_tool_calls"]
    try:
        seconds, baseline = child_peak([*manage, "--client", "no-such-client", "--output", os.devnull])
        print(f"baseline (export of 0 rows): peak RSS {baseline:.1f} MiB, {seconds:.1f} s")
        for fmt in ("jsonl", "csv"):
            with tempfile.NamedTemporaryFile(suffix="." + fmt) as out:
                seconds, peak = child_peak([*manage, "--format", fmt, "--client", TAG, "--output", out.name])
                size = Path(out.name).stat().st_size
            print(
                f"{fmt:5}: {options.rows:,} rows, {size / 2**20:.0f} MiB in {seconds:.1f} s "
                f"({options.rows / seconds:,.0f} rows/s), peak RSS {peak:.1f} MiB (+{peak - baseline:.1f} over the baseline)"
            )
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {table} WHERE client_id = %s", [TAG])
            print(f"cleaned up {cursor.rowcount:,} rows")
    print(f"this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
