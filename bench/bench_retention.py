"""Benchmark: the retention prune of 1,000,000 audit events (issue 28), time and peak memory.

Fills ``mcp_oauth_auditevent`` with ``--rows`` events older than ``AUDIT_RETENTION_DAYS`` (one
``INSERT … SELECT generate_series`` on PostgreSQL) plus ``--keep`` recent ones, then runs the
prune the periodic ``mcp_oauth.tasks.cleanup`` runs (:func:`mcp_oauth.retention.prune_audit`:
primary-key-range batches of ``--batch`` rows) and prints rows deleted, wall time, rows per
second, the process's peak RSS before and after the prune (``getrusage``), and the statements
issued. Expected: every old row deleted, the recent ones kept, and a peak RSS that does not grow
with the row count (the rows are never loaded).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_retention .venv/bin/python bench/bench_retention.py
    ... --rows 100000 --batch 5000

Then (``--erase-rows``, default 100,000) it erases a user with that many audit events and prints
the time, the statements and the peak RSS of :func:`mcp_oauth.authorization_server.user_data.erasure.erase_user_data`.

The database named by DATABASE_URL is migrated and its audit table emptied: use a scratch one.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--erase-rows", type=int, default=100_000, help="audit rows of the user then erased (0: skip)")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("Set DATABASE_URL to a scratch PostgreSQL database.")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from mcp_oauth import retention
    from mcp_oauth.models import AuditEvent
    from mcp_oauth.shared import batches

    call_command("migrate", verbosity=0)
    table = AuditEvent._meta.db_table
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # the fill only; the prune runs under the site's timeout
        cursor.execute(f"TRUNCATE {table}")
        cursor.execute(
            f"INSERT INTO {table} (kind, created_at, client_id, ip_address, detail) "
            "SELECT 'token.issued', now() - interval '400 days' - (n || ' seconds')::interval, 'client-' || (n %% 100), "
            "'203.0.113.7', jsonb_build_object('n', n, 'scope', 'mcp') FROM generate_series(1, %s) AS n",
            [args.rows],
        )
        cursor.execute(
            f"INSERT INTO {table} (kind, created_at, client_id, ip_address, detail) "
            "SELECT 'token.issued', now(), 'recent', NULL, '{}'::jsonb FROM generate_series(1, %s)",
            [args.keep],
        )
        cursor.execute(f"ANALYZE {table}")
        cursor.execute("RESET statement_timeout")
    print(f"filled {args.rows:,} old + {args.keep:,} recent audit rows in {time.perf_counter() - started:.1f} s")

    batches.BATCH_SIZE = args.batch
    rss_before = _rss_mib()
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        counts = retention.prune_audit(timezone.now())
    elapsed = time.perf_counter() - started
    rss_after = _rss_mib()
    left_old = AuditEvent.objects.filter(created_at__lt=timezone.now() - timezone.timedelta(days=365)).count()
    left = AuditEvent.objects.count()
    statements = len(queries.captured_queries)
    print(
        f"pruned {counts['audit_events']:,} rows in {elapsed:.1f} s ({counts['audit_events'] / elapsed:,.0f} rows/s), "
        f"batch {args.batch}, {statements} statements; peak RSS {rss_before:.0f} MiB before, {rss_after:.0f} MiB after; "
        f"left: {left_old} old, {left:,} in all"
    )
    if left_old or left != args.keep:
        sys.exit("FAILED: the prune left old rows or took recent ones")
    if args.erase_rows:
        _erase(args.erase_rows)


def _erase(rows: int) -> None:
    """Erase a user with ``rows`` audit events (one IP each): time, statements, peak RSS."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_oauth.authorization_server.user_data.erasure import erase_user_data
    from mcp_oauth.models import AuditEvent

    User = get_user_model()
    User.objects.filter(username="bench-leaver").delete()
    user = User.objects.create_user("bench-leaver")
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        cursor.execute(
            f"INSERT INTO {AuditEvent._meta.db_table} (kind, created_at, client_id, ip_address, user_id, detail) "
            "SELECT 'token.issued', now(), 'c', '203.0.113.7', %s, jsonb_build_object('n', n) FROM generate_series(1, %s) n",
            [user.pk, rows],
        )
        cursor.execute("RESET statement_timeout")
    rss_before = _rss_mib()
    started = time.perf_counter()
    with CaptureQueriesContext(connection) as queries:
        counts = erase_user_data(user)
    elapsed = time.perf_counter() - started
    left = AuditEvent.objects.filter(user=user).count() + AuditEvent.objects.filter(ip_address="203.0.113.7").count()
    print(
        f"erased a user with {rows:,} audit rows in {elapsed:.1f} s ({counts['audit_anonymised']:,} anonymised, "
        f"{len(queries.captured_queries)} statements); peak RSS {rss_before:.0f} MiB before, {_rss_mib():.0f} MiB after; "
        f"left with their id or IP: {left}"
    )
    if left:
        sys.exit("FAILED: rows still name the erased user")


if __name__ == "__main__":
    main()
