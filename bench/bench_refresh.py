"""Benchmark: concurrent refreshes of one refresh token (issue 11's single-winner rotation with a grace window).

Runs the reference project in one process (Django test client, no network), each request on
its own thread and database connection, at most ``--threads`` at a time (PostgreSQL's
connection limit is shared: keep it at 20 or less). For each count it mints a fresh token pair
through the real authorization-code flow, releases ``count`` refreshes of the same refresh
token, and prints: requests, new generations, callers holding a working pair (their access
token passes the MCP endpoint's bearer check and their refresh token is live), 5xx answers,
wall time and requests per second. Expected: generations=1, working=requests, 5xx=0.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_oauth .venv/bin/python bench/bench_refresh.py --counts 2 10 100
    .venv/bin/python bench/bench_refresh.py            # a throw-away SQLite database

The database named by DATABASE_URL is migrated and written to; use a scratch one.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counts", type=int, nargs="+", default=[2, 10, 100])
    parser.add_argument("--threads", type=int, default=20)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tmp}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("MCP_BASE_URL", "http://testserver")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
    os.environ.setdefault("MCP_LOG_LEVEL", "WARNING")

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, connections
    from django.test import Client
    from django.test.utils import setup_test_environment

    setup_test_environment()
    from django.test import override_settings

    override_settings(
        MCP_OAUTH={
            **settings.MCP_OAUTH,
            "BASE_URL": "http://testserver",
            "THROTTLE_RATES": {"register": None, "authorize": None, "token": None},
        },
        ALLOWED_HOSTS=["testserver"],
    ).enable()
    call_command("migrate", verbosity=0, interactive=False)

    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model, get_refresh_token_model

    from mcp_oauth.models import RefreshGeneration, RefreshTokenGeneration
    from mcp_oauth.resource_server.default_resource import ensure_default_resource
    from tests.support.oauth_helpers import get_code, token_request

    ensure_default_resource()
    user, _ = get_user_model().objects.get_or_create(username="bench-refresh")
    Application = get_application_model()
    app, _ = Application.objects.get_or_create(
        name="bench refresh client",
        defaults={
            "client_type": "public",
            "authorization_grant_type": "authorization-code",
            "redirect_uris": "http://127.0.0.1/callback",
        },
    )
    print(f"database: {connection.vendor}; threads at a time: {args.threads}")
    print(f"{'requests':>8} {'generations':>11} {'working':>8} {'5xx':>4} {'other':>6} {'seconds':>8} {'req/s':>7}")
    for count in args.counts:
        client = Client()
        client.force_login(user)
        code, verifier, _ = get_code(client, app)
        first = token_request(client, app, code, verifier).json()
        checksum = hashlib.sha256(first["refresh_token"].encode()).hexdigest()
        root = RefreshTokenGeneration.objects.get(refresh_token__token_checksum=checksum).generation
        threads = min(count, args.threads)
        barrier = threading.Barrier(threads)

        def one(_, barrier=barrier, first=first):
            try:
                try:
                    barrier.wait(timeout=30)
                except threading.BrokenBarrierError:
                    pass
                response = Client().post(
                    "/oauth/token",
                    {
                        "grant_type": "refresh_token",
                        "refresh_token": first["refresh_token"],
                        "client_id": app.client_id,
                    },
                )
                return response.status_code, response.json()
            finally:
                connections.close_all()

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=threads) as pool:
            results = list(pool.map(one, range(count)))
        elapsed = time.perf_counter() - started
        live = set(
            get_refresh_token_model().objects.filter(revoked__isnull=True).values_list("token_checksum", flat=True)
        )
        working = 0
        for status, body in results:
            if status != 200:
                continue
            ping = client.post(
                "/mcp",
                data='{"jsonrpc":"2.0","id":1,"method":"ping"}',
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {body['access_token']}",
                HTTP_ACCEPT="application/json, text/event-stream",
            )
            if ping.status_code != 401 and hashlib.sha256(body["refresh_token"].encode()).hexdigest() in live:
                working += 1
        generations = RefreshGeneration.objects.filter(parent=root).count()
        errors = sum(1 for status, _ in results if status >= 500)
        other = sum(1 for status, _ in results if status != 200 and status < 500)
        print(
            f"{count:>8} {generations:>11} {working:>8} {errors:>4} {other:>6} {elapsed:>8.2f} {count / elapsed:>7.1f}"
        )
        for status, body in results:
            if status != 200:
                print(f"         {status}: {body}")


if __name__ == "__main__":
    main()
