"""Benchmark: the admin's application list and the prune of never-used clients with 1,000,000
dynamic registrations (issue 28: a public registration endpoint meets floods).

PostgreSQL only. ``load`` inserts ``--rows`` never-used dynamic registrations as DCR leaves them
(an application, its client profile and its RFC 7592 registration access token; created two
days ago) with ``INSERT … SELECT generate_series`` in a few statements; ``admin`` times the
admin's application changelist (as a logged-in superuser, Django's test client, no network:
the median of 5 after a warm-up) unfiltered, filtered, sorted and searched, and prints its
query count; ``prune`` runs ``mcp_oauth.tasks.prune_dynamic_clients`` in a fresh process and
prints its wall time, rate and peak RSS (sampled every 5 s; ``--max-seconds`` stops it early and
extrapolates); ``clean`` deletes what ``load`` inserted (rows whose
``client_id`` starts with ``bench-``). ``all`` runs the four in order.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_registration .venv/bin/python bench/bench_dcr_admin.py all
    DATABASE_URL=... .venv/bin/python bench/bench_dcr_admin.py load --rows 1000000
    DATABASE_URL=... .venv/bin/python bench/bench_dcr_admin.py admin
    DATABASE_URL=... .venv/bin/python bench/bench_dcr_admin.py prune --max-seconds 60

The database named by DATABASE_URL is migrated and written to; use a scratch one.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PREFIX = "bench-"
CHANGELIST = "/admin/oauth2_provider/application/"


def setup() -> None:
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("DATABASE_URL must name a scratch PostgreSQL database")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("DJANGO_DEBUG", "0")  # as in production: no query log kept in memory
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def load(rows: int) -> None:
    from django.db import connection
    from oauth2_provider.settings import oauth2_settings

    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")  # the site's timeout is for requests
        cursor.execute(
            """
            INSERT INTO oauth2_provider_application (client_id, redirect_uris, client_type,
                authorization_grant_type, client_secret, name, user_id, skip_authorization, created, updated,
                algorithm, post_logout_redirect_uris, hash_client_secret, allowed_origins, registration_source)
            SELECT %s || g, 'http://127.0.0.1:' || (1024 + g %% 60000) || '/callback', 'public',
                'authorization-code', '', 'Flood client ' || (g %% 1000), NULL, false,
                now() - interval '2 days' - make_interval(secs => g), now() - interval '2 days', '', '', true, '', 'dcr'
            FROM generate_series(1, %s) AS g
            """,
            [PREFIX, rows],
        )
        cursor.execute(
            """
            INSERT INTO mcp_oauth_clientprofile (metadata, client_uri, logo_uri, client_secret_expires_at,
                last_used_at, application_id, jwks, jwks_uri, dpop_bound_access_tokens)
            SELECT '{"token_endpoint_auth_method": "none"}'::jsonb, '', '', 0, NULL, id, NULL, '', false
            FROM oauth2_provider_application WHERE client_id LIKE %s
            """,
            [PREFIX + "%"],
        )
        cursor.execute(
            """
            INSERT INTO oauth2_provider_accesstoken (token, expires, scope, application_id, user_id, created,
                updated, token_checksum, resource)
            SELECT '', now() + interval '3650 days', %s, id, NULL, created, created,
                md5(client_id) || md5('x' || client_id), '[]'::jsonb
            FROM oauth2_provider_application WHERE client_id LIKE %s
            """,
            [oauth2_settings.DCR_REGISTRATION_SCOPE, PREFIX + "%"],
        )
        cursor.execute("ANALYZE oauth2_provider_application")
        cursor.execute("ANALYZE mcp_oauth_clientprofile")
        cursor.execute("ANALYZE oauth2_provider_accesstoken")
    print(f"load: {rows} registrations (+ profiles, registration tokens) in {time.perf_counter() - started:.1f} s")


def admin() -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from oauth2_provider.models import get_application_model

    settings.ALLOWED_HOSTS = ["testserver"]
    # Production settings (DEBUG off) but no collectstatic here: plain static URLs.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    User = get_user_model()
    superuser = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", "bench@example.com", "x"
    )
    client = Client()
    client.force_login(superuser)
    total = get_application_model().objects.count()
    print(f"admin: {total} applications in the table")
    cases = [
        ("unfiltered", ""),
        ("page 50", "?p=49"),
        ("source = dcr", "?registration_source__exact=dcr"),
        ("source = manual", "?registration_source__exact=manual"),
        ("client type = confidential", "?client_type__exact=confidential"),
        ("grant type = client credentials", "?grant_type=client-credentials"),
        ("last used = never", "?used=never"),
        ("last used = 7 days", "?used=7"),
        ("created = past 7 days", "?created__gte=2000-01-01"),
        ("trust = trusted", "?trust=trusted"),
        ("sorted by created", "?o=7"),
        ("sorted by last used", "?o=6"),
        ("search: a client_id", f"?q={PREFIX}424242"),
        ("search: a name", "?q=Flood+client+42"),
        ("search: no match", "?q=no-such-client-anywhere"),
    ]
    for label, query in cases:
        response = client.get(CHANGELIST + query, secure=True)
        assert response.status_code == 200, (label, response.status_code, response.content[:300])
        times = []
        for _ in range(5):
            started = time.perf_counter()
            with CaptureQueriesContext(connection) as queries:
                response = client.get(CHANGELIST + query, secure=True)
            times.append((time.perf_counter() - started) * 1000)
        print(f"  {label:34} {statistics.median(times):7.1f} ms (max {max(times):7.1f})  {len(queries)} queries")


def prune_in_process() -> None:
    from mcp_oauth.tasks import prune_dynamic_clients

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    result = prune_dynamic_clients()
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        f"prune: {result} in {elapsed:.1f} s ({result['clients'] / max(elapsed, 1e-9):.0f} clients/s); "
        f"peak RSS {peak / 1024:.0f} MiB (after setup {before / 1024:.0f} MiB)"
    )


def dynamic_count() -> int:
    from oauth2_provider.models import get_application_model

    return get_application_model().objects.filter(registration_source="dcr").count()


def rss_kib(pid: int) -> dict[str, int]:
    values = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value, _unit = line.split()
                values[name[:-1]] = int(value)
    return values


def prune(max_seconds: float) -> None:
    """In a fresh process, so the peak RSS is the prune's alone; its RSS is sampled every 5 s. With
    ``max_seconds`` > 0 it is stopped then (the batch in flight rolls back) and the rate is printed."""
    before = dynamic_count()
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, "_prune"])
    samples = []
    while child.poll() is None:
        time.sleep(5)
        elapsed = time.perf_counter() - started
        try:
            memory = rss_kib(child.pid)
        except (FileNotFoundError, ProcessLookupError):
            break
        if "VmHWM" not in memory:  # exited, not yet reaped
            break
        samples.append((elapsed, memory))
        print(f"  {elapsed:6.0f} s  RSS {memory['VmRSS'] / 1024:5.0f} MiB  peak {memory['VmHWM'] / 1024:5.0f} MiB")
        if max_seconds and elapsed >= max_seconds:
            child.terminate()
            child.wait()
            break
    elapsed = time.perf_counter() - started
    deleted = before - dynamic_count()
    child.wait()
    peak = max((memory["VmHWM"] for _, memory in samples), default=0)
    print(
        f"prune: {deleted} of {before} never-used dynamic clients deleted in {elapsed:.0f} s "
        f"({deleted / max(elapsed, 1e-9):.0f}/s; all {before} at that rate: {before / max(deleted, 1) * elapsed / 60:.1f} min); "
        f"peak RSS {peak / 1024:.0f} MiB"
    )


def clean() -> None:
    from django.contrib.auth import get_user_model
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")
        cursor.execute(
            "DELETE FROM oauth2_provider_accesstoken WHERE application_id IN "
            "(SELECT id FROM oauth2_provider_application WHERE client_id LIKE %s)",
            [PREFIX + "%"],
        )
        cursor.execute(
            "DELETE FROM mcp_oauth_clientprofile WHERE application_id IN "
            "(SELECT id FROM oauth2_provider_application WHERE client_id LIKE %s)",
            [PREFIX + "%"],
        )
        cursor.execute("DELETE FROM oauth2_provider_application WHERE client_id LIKE %s", [PREFIX + "%"])
        print(f"clean: {cursor.rowcount} applications deleted")
    get_user_model().objects.filter(username="bench-admin").delete()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=["load", "admin", "prune", "clean", "all", "_prune"])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--max-seconds", type=float, default=0, help="prune: stop after this long (0: run to the end)")
    args = parser.parse_args()
    setup()
    if args.step == "_prune":
        prune_in_process()
        return
    if args.step in ("load", "all"):
        load(args.rows)
    if args.step in ("admin", "all"):
        admin()
    if args.step in ("prune", "all"):
        prune(args.max_seconds)
    if args.step in ("clean", "all"):
        clean()


if __name__ == "__main__":
    main()
