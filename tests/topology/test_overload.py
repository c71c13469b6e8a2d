"""Overload on the production topology (issue 30): the reference site through ``make serve``
(project/serve.py: gunicorn, 2 uvicorn workers, PostgreSQL, Redis, Celery) driven open-loop
past its capacity. Invariants, not speed: every request is answered (success, 503 or 429), no
other 5xx, every 503 carries Retry-After and a JSON-RPC error body, /readyz answers throughout.
The figures of the full 5x / 30 s run come from bench/overload.py."""

from __future__ import annotations

import asyncio
import os

import pytest
from django.db import connection

from bench.overload import Probes, Site, closed_loop, mint_token, open_loop, probe_readyz, run
from tests.support.topology import REDIS_URL, require_redis

pytestmark = pytest.mark.e2e

#: "Answered within a generous bound": a request with no answer after this long is a timeout.
ANSWER_BOUND_SECONDS = 15


@pytest.fixture(scope="module")
def site():
    """The site on its own database (``<test database>_overload``: serve creates and migrates it)."""
    if connection.vendor != "postgresql" and not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://…)")
    require_redis()
    import bench.overload as overload

    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/mcp_authz").rsplit("/", 1)[0]
    overload.DATABASE_URL = f"{base}/{connection.settings_dict['NAME']}_overload"
    overload.REDIS_URL = REDIS_URL
    # a small bound, so that 2x capacity certainly crosses it on any machine
    with Site(max_in_flight="4") as running:
        yield running
    _drop_database(overload.DATABASE_URL)


def _drop_database(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_twice_the_capacity_is_answered_with_successes_and_503s(site):
    token = _token(site)
    capacity_run = run(closed_loop(site.port, token, 8, 2))
    capacity = capacity_run.ok / capacity_run.seconds
    assert capacity > 0

    async def overloaded():
        stop, probes = asyncio.Event(), Probes()
        prober = asyncio.create_task(probe_readyz(site.port, stop, probes))
        try:
            result = await open_loop(site.port, token, 2 * capacity, 5, ANSWER_BOUND_SECONDS, connections=64)
        finally:
            stop.set()
            await prober
        return result, probes

    result, probes = run(overloaded())
    answered = sum(result.statuses.values())
    assert result.sent > 0
    assert (result.timeouts, result.dropped) == (0, 0)
    assert answered == result.sent
    assert set(result.statuses) <= {200, 429, 503}
    assert result.statuses.get(503, 0) > 0  # past the bound of 4 per worker
    assert result.bad_503 == 0  # each with Retry-After and a JSON-RPC -32000 body
    assert result.ok == result.statuses.get(200, 0)  # every 200 is the call's own result
    assert set(probes.statuses) == {200}
    assert sum(probes.statuses.values()) >= 5


def _token(site) -> str:
    from multiprocessing import get_context

    # Django is set up for the test database in this process: mint through a fresh process
    # pointed at the site's database (its connections end with it).
    with get_context("spawn").Pool(1) as pool:
        return pool.apply(_mint, (site.base, site.env["DATABASE_URL"], site.env["REDIS_URL"]))


def _mint(base: str, database_url: str, redis_url: str) -> str:
    import bench.overload as overload

    overload.DATABASE_URL, overload.REDIS_URL = database_url, redis_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    return mint_token(base)
