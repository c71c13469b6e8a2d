"""Profile of the token endpoint in one process (no network): SQL queries, CPU and where it goes.

Against PostgreSQL and Redis as ``bench/prod_topology.py`` configures them, for the two grants
of its ``grants`` scenario (``client_credentials`` with HTTP Basic for a confidential client,
``refresh_token`` for a public client, with rotation):

1. **queries per grant**: one grant through Django's test client under
   ``CaptureQueriesContext`` (``--sql`` prints them);
2. **CPU per grant through the site's ASGI application** (``project.asgi.application``, what
   the server runs), C requests at a time on one event loop: ``time.process_time()`` of the
   whole process (every thread) per grant, and grants per CPU-second;
3. **cProfile** of the same grants driven synchronously in this thread (the view, DOT,
   oauthlib and the ORM; cProfile sees one thread only): top functions by cumulative and own time.

    .venv/bin/python bench/profile_token.py [--grants 1000] [--concurrency 8] [--top 30] [--sql] [--no-profile]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import asgi_post  # noqa: E402
from bench.prod_topology import BASE, django_setup, fixtures  # noqa: E402

FORM = "application/x-www-form-urlencoded"


class Grants:
    """Request factories of the two grants: ``next()`` -> ``(headers, body)``; ``ok(payload)`` after a 200."""

    def __init__(self, fx: dict) -> None:
        service, secret = fx["service"], fx["service_secret"]
        self.basic = "Basic " + base64.b64encode(f"{service.client_id}:{secret}".encode()).decode()
        self.public = fx["public"]
        self.new_refresh: Callable[[], str] = fx["refresh_token"]

    def client_credentials(self) -> tuple[Callable[[], tuple[dict, bytes]], Callable[[dict], None]]:
        body = urlencode({"grant_type": "client_credentials", "resource": BASE + "/mcp"}).encode()
        headers = {"Authorization": self.basic, "Content-Type": FORM}
        return (lambda: (headers, body)), (lambda payload: None)

    def refresh(self) -> tuple[Callable[[], tuple[dict, bytes]], Callable[[dict], None]]:
        state = {"refresh": self.new_refresh()}
        client_id = self.public.client_id

        def make() -> tuple[dict, bytes]:
            body = {"grant_type": "refresh_token", "refresh_token": state["refresh"], "client_id": client_id}
            return {"Content-Type": FORM}, urlencode(body).encode()

        def ok(payload: dict) -> None:
            state["refresh"] = payload["refresh_token"]

        return make, ok


def sync_post(client, headers: dict, body: bytes) -> tuple[int, bytes]:
    extra = {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items() if k.lower() != "content-type"}
    response = client.post("/oauth/token", data=body, content_type=FORM, **extra)
    return response.status_code, response.content


def count_queries(grants: Grants, show_sql: bool) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    for label, factory in (("client_credentials", grants.client_credentials), ("refresh_token", grants.refresh)):
        make, ok = factory()
        for _ in range(3):  # warm: caches filled, as on a busy server
            status, content = sync_post(client, *make())
            assert status == 200, (status, content)
            ok(json.loads(content))
        with CaptureQueriesContext(connection) as queries:
            status, content = sync_post(client, *make())
        assert status == 200, (status, content)
        ok(json.loads(content))
        print(f"{label:20} {len(queries.captured_queries):3d} SQL queries per grant")
        if show_sql:
            for query in queries.captured_queries:
                print("    ", query["sql"][:220])


def asgi_cpu(grants: Grants, n: int, concurrency: int) -> None:
    from project.asgi import application

    async def run(pairs) -> tuple[int, float, float]:
        per = max(1, n // concurrency)

        async def worker(make, ok) -> int:
            done = 0
            for _ in range(per):
                status, _, content = await asgi_post(application, "/oauth/token", *make())
                assert status == 200, (status, content)
                ok(json.loads(content))
                done += 1
            return done

        for make, ok in pairs:  # warm
            status, _, content = await asgi_post(application, "/oauth/token", *make())
            assert status == 200, (status, content)
            ok(json.loads(content))
        cpu, wall = time.process_time(), time.perf_counter()
        done = sum(await asyncio.gather(*(worker(make, ok) for make, ok in pairs)))
        return done, time.process_time() - cpu, time.perf_counter() - wall

    for label, factory in (("client_credentials", grants.client_credentials), ("refresh_token", grants.refresh)):
        pairs = [factory() for _ in range(concurrency)]  # the ORM work of the fixtures, outside the loop
        done, cpu, wall = asyncio.run(run(pairs))
        print(
            f"{label:20} ASGI in process: {done / wall:6.0f} grants/s, {1000 * cpu / done:6.2f} ms CPU/grant, "
            f"{done / cpu:6.0f} grants per CPU-second (client side included)"
        )


def profile(grants: Grants, n: int, top: int) -> None:
    from django.test import Client

    client = Client()
    for label, factory in (("client_credentials", grants.client_credentials), ("refresh_token", grants.refresh)):
        make, ok = factory()
        for _ in range(20):
            status, content = sync_post(client, *make())
            ok(json.loads(content))
        prof = cProfile.Profile(time.thread_time)  # CPU time, not time spent waiting for the database
        started = time.thread_time()
        prof.enable()
        for _ in range(n):
            status, content = sync_post(client, *make())
            assert status == 200, (status, content)
            ok(json.loads(content))
        prof.disable()
        elapsed = time.thread_time() - started
        print(f"\n===== {label}: {1000 * elapsed / n:.2f} ms CPU per grant under cProfile (sync, test client)")
        stats = pstats.Stats(prof)
        stats.sort_stats("cumulative").print_stats(top)
        stats.sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--grants", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--sql", action="store_true", help="print the SQL of one grant")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    django_setup()
    grants = Grants(fixtures())
    count_queries(grants, args.sql)
    asgi_cpu(grants, args.grants, args.concurrency)
    if not args.no_profile:
        profile(grants, min(args.grants, 300), args.top)


if __name__ == "__main__":
    main()
