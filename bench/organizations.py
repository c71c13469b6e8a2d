"""``tools/call`` with 1 organization and with 10,000 (issue 31), side by side with the official SDK
server, both MCP eras, in one interleaved run.

Creates two PostgreSQL databases of its own on the server of ``DATABASE_URL`` (dropped at the end,
whatever happens): ``one`` holds one organization with 10 clients; ``many`` is a copy of it
(``CREATE DATABASE … TEMPLATE``) plus 9,999 more organizations with 10 clients each (bulk
``INSERT``s: 10,000 organizations, their 10,000 endpoint resources and memberships, 100,000
clients and their 100,000 approvals). The token every client loop presents is bound to the first
organization on the shared endpoint (a ``TokenOrganization`` row, as the consent page makes it), so
each call goes through the organization check of the hot path: its organization from the resource
registry (10,001 resources there with ``many``), the user's membership kept with the token entry.

Servers (1 process each, as ``bench/prod_topology.py --only compare`` starts them): ``ours-1``
on ``one``, ``ours-10k`` on ``many`` (each its own Redis key prefix), the ``mcp`` SDK server
(stateful: 2025-11-25 sessions) on ``one``; every server also gets the 2026-07-28 stateless calls
(``-modern`` rows). Prints req/s, p50/p99, server CPU per call, the CPU per call spent elsewhere
(PostgreSQL, Redis, the load generator, the whole machine) and the ratios against the SDK, then
how the 10,000-organization ratio compares with the 1-organization one. ``--pairs N``: N fresh
pairs of our two servers (the SDK server stays), each with all its rounds, and the median of the
pairs' 10,000 ÷ 1 ratios (two processes of one server differ by up to ~15 % here). The rows of a
round follow :func:`round_order` (balanced: ``--rounds`` a multiple of 6 puts each row at each
place once), each after ``--settle`` seconds of rest. ``--control``: the ``ours-10k`` server on
the 1-organization database too, an A/A run that shows the bench's own bias. Not a test: nothing is asserted::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/11 \\
        .venv/bin/python bench/organizations.py [--seconds 4] [--rounds 6] [--pairs 4] [--connections 16]

``--in-process``: no servers; the same two databases, then ``--pairs`` pairs of processes (one on
``one``, one on ``many``, alternating) each driving ``project.asgi.application`` directly with
``--calls`` 2026-07-28 ``tools/call`` (16 at a time on one event loop, the token bound to the first
organization, after a warm-up that loads the registry). Each prints its CPU per call, the CPU its
garbage collections took per call (by generation) and the objects the collector tracks; then the
medians and the 10,000 / 1 ratios. ``--callgrind``: each process under ``valgrind --tool=callgrind``,
instructions counted only during the calls, the collector off during them (the request path's own
instructions; the collections are what the runs without ``--callgrind`` report)::

    DATABASE_URL=… REDIS_URL=… .venv/bin/python bench/organizations.py --in-process [--calls 4000] [--pairs 3]
    DATABASE_URL=… REDIS_URL=… .venv/bin/python bench/organizations.py --in-process --callgrind --calls 640 --pairs 1

``--legacy`` (with ``--in-process``): 2025-11-25 ``tools/call`` in one session (``initialize``,
``notifications/initialized``), as the servers' ``ours-1``/``ours-10k`` rows, instead.
``--wire`` (with ``--in-process``): each process also logs what it sends to PostgreSQL and Redis
(:mod:`bench.wire_log`: every statement and command, counted and timed): the opening (the first
requests of the process: registry, token, session), per warm call, and with ``--legacy`` a new
session in the warm process (each round of the servers opens 16); then ``EXPLAIN (ANALYZE,
BUFFERS)`` of each statement on both databases::

    DATABASE_URL=… REDIS_URL=… .venv/bin/python bench/organizations.py --in-process --legacy --wire --calls 3200 --pairs 2
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import prod_topology as topology  # noqa: E402
from bench.loadgen import Connection, Tally, percentile  # noqa: E402

ORGANIZATIONS = 10_000
CLIENTS_PER_ORGANIZATION = 10
BATCH = 5_000


def _ticks(pid: int) -> int:
    """utime + stime of ``pid`` (clock ticks; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def elsewhere() -> dict[str, float]:
    """CPU seconds so far of what else a call costs on this machine: every PostgreSQL process
    (backends, WAL writer, checkpointer), Redis, this process (the load generator) and the
    machine as a whole (busy time of all cores, /proc/stat). A process that ended between two
    samples drops out of its sum (a backend lives as long as its server's pool connection)."""
    sums = {"postgres": 0, "redis": 0}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
        except OSError:
            continue
        key = "postgres" if comm == "postgres" else "redis" if comm.startswith("redis") else None
        if key:
            sums[key] += _ticks(int(entry.name))
    busy = sum(
        int(x) for i, x in enumerate(Path("/proc/stat").read_text().split("\n")[0].split()[1:]) if i not in (3, 4)
    )
    tick = os.sysconf("SC_CLK_TCK")
    return {
        "postgres": sums["postgres"] / tick,
        "redis": sums["redis"] / tick,
        "client": time.process_time(),
        "machine": busy / tick,
    }


def round_order(names: list[str], round_: int) -> list[str]:
    """The rows of round ``round_``: rotated by one each round, and every other round with the
    1-organization and 10,000-organization rows swapped, so that each row follows each other one
    as often. A row's calls share the machine with what the server of the row before it still
    does once its calls are answered (the audit writer's last batch, closing connections and
    sessions); with a fixed cyclic order the ``ours-10k`` row always followed ``ours-1-modern``
    and the ``ours-1`` row the SDK's: two identical processes on one database measured 0.947x
    (2025-11-25) and 1.049x (2026-07-28) in that order (4 pairs)."""
    if round_ % 2:
        swap = {"ours-1": "ours-10k", "ours-1-modern": "ours-10k-modern"}
        swap |= {b: a for a, b in swap.items()}
        names = [swap.get(name, name) for name in names]
    shift = round_ % len(names)
    return names[shift:] + names[:shift]


def new_total() -> dict:
    """A row's sums: its calls' tally, server CPU seconds, seconds, bad answers, req/s per round and
    the CPU elsewhere (:func:`elsewhere`)."""
    return {"tally": Tally(), "cpu": 0.0, "seconds": 0.0, "bad": 0, "rounds": [], "other": {}}


def scale_ratios(totals: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """Per era, (the 10,000-organization req/s ratio against the SDK ÷ the 1-organization one,
    the same for CPU per call)."""

    def rps_cpu(name: str) -> tuple[float, float]:
        total = totals[name]
        count = len(total["tally"].latencies)
        return count / total["seconds"], total["cpu"] / count

    out = {}
    for era, suffix in (("2025-11-25", ""), ("2026-07-28", "-modern")):
        (one_rps, one_cpu), (many_rps, many_cpu) = rps_cpu(f"ours-1{suffix}"), rps_cpu(f"ours-10k{suffix}")
        out[era] = (many_rps / one_rps, many_cpu / one_cpu)  # the SDK's figure cancels out
    return out


def pair_summary(totals: dict[str, dict]) -> str:
    """One pair of processes: each era's 10,000 ÷ 1 ratios."""
    return "; ".join(
        f"{era} 10,000 vs 1: req/s {rps:.3f} x, CPU per call {cpu:.3f} x"
        for era, (rps, cpu) in scale_ratios(totals).items()
    )


def database_url(name: str) -> str:
    parts = urlsplit(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    return urlunsplit(parts._replace(path="/" + name))


def admin(sql: str) -> None:
    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def populate_one(token_raw: str) -> None:
    """The first organization (``org-00000``), the bench user a member, its 10 approved clients, the
    token bound to it."""
    from django.utils import timezone

    from mcp_oauth.models import Organization, OrganizationMembership, TokenOrganization
    from mcp_oauth.resource_server.cache import token_checksum

    fx = FIXTURES
    first = Organization.objects.create(slug="org-00000", name="Organization 0")  # its endpoint: a receiver
    OrganizationMembership.objects.create(organization=first, user=fx["user"])
    clients(first.pk, 0, alias="default")
    TokenOrganization.objects.create(
        token_checksum=token_checksum(token_raw),
        token_kind="access_token",
        organization=first,
        expires=timezone.now() + timezone.timedelta(hours=2),
    )


def clients(organization_pk: int, index: int, alias: str, organization_pks: list[int] | None = None) -> None:
    """10 clients per organization (``organization_pks``: many at once) and their approvals."""
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import OrganizationClient

    Application = get_application_model()
    pks = organization_pks or [organization_pk]
    applications = [
        Application(
            name=f"client {index + n // CLIENTS_PER_ORGANIZATION}-{n % CLIENTS_PER_ORGANIZATION}",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1/callback",
            client_secret="",
        )
        for n in range(len(pks) * CLIENTS_PER_ORGANIZATION)
    ]
    created = Application.objects.using(alias).bulk_create(applications, batch_size=BATCH)
    OrganizationClient.objects.using(alias).bulk_create(
        [
            OrganizationClient(
                organization_id=pks[n // CLIENTS_PER_ORGANIZATION],
                application_id=application.pk,
                status=OrganizationClient.Status.APPROVED,
            )
            for n, application in enumerate(created)
        ],
        batch_size=BATCH,
    )


def populate_many(alias: str) -> float:
    """9,999 more organizations with their endpoints, a member each and 10 clients each; seconds taken."""
    from django.contrib.auth import get_user_model
    from django.db import connections

    from mcp_oauth.models import Organization, OrganizationMembership, ProtectedResource
    from mcp_oauth.resource_server.organization_endpoints import endpoint_uri

    started = time.monotonic()
    User = get_user_model()
    users = User.objects.using(alias).bulk_create(
        [User(username=f"member-{n:05d}", email=f"m{n}@example.com") for n in range(1, ORGANIZATIONS)],
        batch_size=BATCH,
    )
    scopes = ProtectedResource.objects.using(alias).get(is_default=True).scopes
    for start in range(1, ORGANIZATIONS, BATCH):
        stop = min(start + BATCH, ORGANIZATIONS)
        rows = Organization.objects.using(alias).bulk_create(
            [Organization(slug=f"org-{n:05d}", name=f"Organization {n}") for n in range(start, stop)]
        )
        ProtectedResource.objects.using(alias).bulk_create(
            [
                ProtectedResource(uri=endpoint_uri(org.slug), name=org.name, scopes=scopes, organization=org)
                for org in rows
            ]
        )
        OrganizationMembership.objects.using(alias).bulk_create(
            [
                OrganizationMembership(organization=org, user=users[n - 1])
                for n, org in zip(range(start, stop), rows, strict=True)
            ]
        )
        clients(0, start, alias, [org.pk for org in rows])
    with connections[alias].cursor() as cursor:
        cursor.execute("ANALYZE")
    return time.monotonic() - started


async def whoami(port: int, token: str) -> str:
    """The organization ``whoami`` reports on a 2026-07-28 call (the check is on)."""
    conn = Connection("127.0.0.1", port)
    meta = topology.MODERN_META
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "whoami", "arguments": {}, "_meta": meta},
    }
    headers = {**topology.modern_headers(token), "Mcp-Name": "whoami"}
    response = await conn.request("POST", "/mcp", headers, json.dumps(body).encode())
    await conn.close()
    for message in response.json_messages():
        result = message.get("result") or {}
        return str((result.get("structuredContent") or {}).get("organization"))
    return "?"


FIXTURES: dict = {}


def close_django() -> None:
    """Close this process's database connections, its pools' too (a template database must have
    none; a database is dropped without them)."""
    if "django.db" not in sys.modules:
        return
    from django.db import connections

    for alias in connections:
        connection = connections[alias]
        connection.close()
        close_pool = getattr(connection, "close_pool", None)
        if close_pool is not None:
            close_pool()


def build(one: str, many: str) -> str:
    """Create and fill the databases ``one`` and ``many`` (``one`` created by the caller); the raw
    token bound to the first organization in both."""
    topology.DATABASE_URL = database_url(one)
    topology.REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11")
    os.environ["DATABASE_URL"] = topology.DATABASE_URL
    topology.django_setup()
    from django.db import connections

    FIXTURES.update(topology.fixtures())
    token, _ = FIXTURES["mint"]()
    populate_one(token)
    close_django()
    admin(f'CREATE DATABASE "{many}" TEMPLATE "{one}"')
    connections.settings["many"] = {**connections.settings["default"], "NAME": many}
    print(f"populating {ORGANIZATIONS:,} organizations x {CLIENTS_PER_ORGANIZATION} clients …", flush=True)
    seconds = populate_many("many")
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import Organization, ProtectedResource

    print(
        f"{Organization.objects.using('many').count():,} organizations, "
        f"{ProtectedResource.objects.using('many').count():,} resources, "
        f"{get_application_model().objects.using('many').count():,} clients in {seconds:.1f} s (bulk INSERTs)"
    )
    close_django()
    return token


def child(calls: int, token: str, callgrind: bool, legacy: bool = False, wire: bool = False) -> None:
    """One process of ``--in-process`` (``DATABASE_URL``: its database): ``calls`` calls through
    ``project.asgi.application`` (``legacy``: 2025-11-25 calls in one session; ``wire``: with what
    they send to PostgreSQL and Redis, :mod:`bench.wire_log`); prints one JSON line."""
    from bench.common import asgi_post
    from bench.wire_log import WireLog, explain

    topology.DATABASE_URL = os.environ["DATABASE_URL"]
    topology.REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/11")
    topology.django_setup()
    from django.db import connection

    from project.asgi import application

    # The main thread's connection (migrate, ANALYZE) back to the pool: held, it left one of the
    # pool's 2 to the requests beside the audit writer's, and a request's first query waited for
    # the writer to go idle (~200 ms).
    connection.close()
    log = WireLog().install() if wire else None
    opening: dict = {}
    again: dict = {}
    warm: dict = {}
    steps: dict[str, float] = {}  # ms of the steps of the last session opened
    headers, body = topology.modern_headers(token), topology.modern_call_body
    spent = {0: 0.0, 1: 0.0, 2: 0.0}
    runs = {0: 0, 1: 0, 2: 0}
    started: list[float] = [0.0]

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started[0] = time.process_time()
        else:
            spent[info["generation"]] += time.process_time() - started[0]
            runs[info["generation"]] += 1

    def control(switch: str) -> None:  # callgrind: count the calls only
        subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True)

    async def open_session() -> dict[str, str]:
        """A new 2025-11-25 session, as the bench client opens one per connection and round: its headers."""
        init, started = json.dumps(topology.INIT).encode(), time.perf_counter()
        status, answer_headers, answer = await asgi_post(
            application, "/mcp", topology.mcp_headers(token, version=False), init
        )
        if status != 200 or "mcp-session-id" not in answer_headers:
            raise RuntimeError(f"initialize answered {status}: {answer[:300]!r}")
        opened = topology.mcp_headers(token, answer_headers["mcp-session-id"])
        steps["initialize"] = 1000 * (time.perf_counter() - started)
        await asgi_post(application, "/mcp", opened, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        steps["initialized"] = 1000 * (time.perf_counter() - started) - steps["initialize"]
        return opened

    async def reopen() -> None:
        """``--wire --legacy``: a new session in the warm process (each bench round opens 16) and its
        first call, logged in ``opening["again"]``."""
        assert log is not None
        log.on, started = True, time.perf_counter()
        status, _, answer = await asgi_post(application, "/mcp", await open_session(), topology.call_body(1))
        log.on = False
        if status != 200:
            raise RuntimeError(f"first call of a new session answered {status}: {answer[:300]!r}")
        again.update(log.take(), ms=1000 * (time.perf_counter() - started), steps=dict(steps))

    async def run() -> dict:
        nonlocal headers, body
        if log is not None:  # the opening: initialize, initialized and the first call (a new session)
            log.on = True
            opened = time.perf_counter()
        if legacy:  # a 2025-11-25 session, as the bench client opens one per connection
            headers, body = await open_session(), topology.call_body
        for n in range(200):  # warm: the registry loaded, the token's entry cached and kept decoded
            status, _, answer = await asgi_post(application, "/mcp", headers, body(n))
            if status != 200:
                raise RuntimeError(f"warm-up call answered {status}: {answer[:300]!r}")
            if log is not None and n == 0:
                log.on = False
                opening.update(log.take(), ms=1000 * (time.perf_counter() - opened))
        per, failed = calls // 16, [0]

        async def worker() -> None:
            for n in range(per):
                status, _, _ = await asgi_post(application, "/mcp", headers, body(n))
                failed[0] += status != 200

        tracked = len(gc.get_objects())
        if callgrind:
            gc.collect()
            gc.disable()
            control("on")
        gc.callbacks.append(on_gc)
        if log is not None:
            log.on = True
        cpu = time.process_time()
        await asyncio.gather(*(worker() for _ in range(16)))
        cpu = time.process_time() - cpu
        if log is not None:
            log.on = False
        gc.callbacks.remove(on_gc)
        if callgrind:
            control("off")
        if log is not None:
            warm.update(log.take())
            if legacy:
                await reopen()
        done = per * 16
        return {
            "cpu_us": 1e6 * cpu / done,
            "gc_us": [1e6 * spent[generation] / done for generation in (0, 1, 2)],
            "gc_runs": [runs[generation] for generation in (0, 1, 2)],
            "tracked": tracked,
            "frozen": gc.get_freeze_count(),
            "failed": failed[0],
            "calls": done,
        }

    result = asyncio.run(run())
    if log is not None:
        done = result["calls"]
        plans = explain({**opening["samples"], **again.get("samples", {}), **warm["samples"]})

        def statements(taken: dict, per: int) -> dict:
            return {
                sql: {"per_call": count / per, "ms": 1000 * seconds / count, "plan": plans.get(sql, "")}
                for sql, (count, seconds) in sorted(taken["sql"].items(), key=lambda item: -item[1][0])
            }

        result["sql"], result["redis"] = statements(warm, done), {c: n / done for c, n in warm["redis"].items()}
        result["opening"] = {"ms": opening["ms"], "sql": statements(opening, 1), "redis": opening["redis"]}
        if again:
            result["again"] = {"ms": again["ms"], "sql": statements(again, 1), "redis": again["redis"]}
            result["again_steps_ms"] = again["steps"]
    print("RESULT " + json.dumps(result), flush=True)


def in_process(args: argparse.Namespace, one: str, many: str, token: str) -> None:
    """``--in-process``: alternate processes on ``one`` and ``many``; medians and ratios."""
    results: dict[str, list[dict]] = {one: [], many: []}
    for pair in range(args.pairs):
        for name in (one, many) if pair % 2 == 0 else (many, one):
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", str(args.calls)]
            argv += ["--legacy"] * args.legacy + ["--wire"] * args.wire
            if args.callgrind:
                argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null", *argv]
                argv.append("--callgrind")
            env = {
                **os.environ,
                "DATABASE_URL": database_url(name),
                "BENCH_CACHE_KEY_PREFIX": f"orgs-{name}",
                "BENCH_ORGS_TOKEN": token,
                "PYTHONHASHSEED": "0",
            }
            run = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
            line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
            if run.returncode != 0 or line is None:
                raise RuntimeError(f"child on {name} failed: {run.stderr[-2000:]}")
            result = json.loads(line[7:])
            if args.callgrind:
                found = re.search(r"Collected : (\d+)", run.stderr)
                result["instructions"] = int(found.group(1)) / result["calls"] if found else float("nan")
            results[name].append(result)
            brief = {key: value for key, value in result.items() if key not in ("sql", "redis", "opening", "again")}
            print(f"{'10,000' if name == many else '1':>6} organization(s): {json.dumps(brief)}", flush=True)

    def median(name: str, pick) -> float:
        return statistics.median(pick(r) for r in results[name])

    era = "2025-11-25 session" if args.legacy else "2026-07-28"
    if args.wire:
        print_wire(results[one][-1], results[many][-1])
    print(f"\n== in process, {era} calls, {args.calls} calls x {args.pairs} pairs of processes (medians)")
    rows = [("CPU us/call", lambda r: r["cpu_us"]), ("GC us/call (all)", lambda r: sum(r["gc_us"]))]
    rows += [("GC gen2 us/call", lambda r: r["gc_us"][2]), ("tracked objects", lambda r: r["tracked"])]
    if args.callgrind:
        rows.insert(0, ("instructions/call", lambda r: r["instructions"]))
    for label, pick in rows:
        a, b = median(one, pick), median(many, pick)
        print(f"{label:20} 1 org {a:14,.1f}   10,000 orgs {b:14,.1f}   ratio {b / a if a else float('nan'):.3f} x")


def print_wire(one: dict, many: dict) -> None:
    """``--wire``: the statements and commands of the opening (initialize, initialized and the first
    call: a new session) and per warm call, 1 organization next to 10,000 (the last process of
    each), then each statement's plan on both databases."""
    sections = (
        (
            f"the opening ({one['opening']['ms']:.0f} ms / {many['opening']['ms']:.0f} ms)",
            "",
            one["opening"],
            many["opening"],
        ),
        ("per warm call", "/call", one, many),
    )
    if "again" in one and "again" in many:  # --legacy: a new session in the warm process
        title = f"a new session in the warm process ({one['again']['ms']:.1f} ms / {many['again']['ms']:.1f} ms)"
        sections += ((title, "", one["again"], many["again"]),)
    plans: dict[str, tuple[str, str]] = {}
    for title, per, a_side, b_side in sections:
        print(f"\n== {title}: PostgreSQL statements (count{per}, ms per execute incl. round trip; 1 org | 10,000)")
        statements = list(dict.fromkeys([*a_side["sql"], *b_side["sql"]]))
        for sql in statements:
            a, b = a_side["sql"].get(sql, {}), b_side["sql"].get(sql, {})
            plans.setdefault(sql, (a.get("plan", ""), b.get("plan", "")))
            print(
                f"  {a.get('per_call', 0):7.4f} {a.get('ms', 0):7.3f} ms | {b.get('per_call', 0):7.4f} "
                f"{b.get('ms', 0):7.3f} ms   {sql[:400]}"
            )
        if not statements:
            print("  none")
        print(f"== {title}: Redis commands (count{per}; 1 org | 10,000)")
        for command in dict.fromkeys([*a_side["redis"], *b_side["redis"]]):
            print(f"  {a_side['redis'].get(command, 0):7.4f} | {b_side['redis'].get(command, 0):7.4f}   {command}")
    for sql, pair in plans.items():
        for label, plan in zip(("1 org", "10,000 orgs"), pair, strict=True):
            if plan:
                print(f"\n-- EXPLAIN ANALYZE on {label}: {sql[:200]}\n{plan}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument(
        "--control",
        action="store_true",
        help="an A/A run: the ours-10k server on the 1-organization database too (the bench's own bias)",
    )
    parser.add_argument("--settle", type=float, default=0.5, help="seconds of rest before each row (not measured)")
    parser.add_argument("--in-process", action="store_true", help="processes driving the ASGI app, no servers")
    parser.add_argument("--calls", type=int, default=4000, help="--in-process: calls per process")
    parser.add_argument(
        "--pairs", type=int, default=None, help="pairs of fresh processes of ours (servers: 1; --in-process: 3)"
    )
    parser.add_argument("--callgrind", action="store_true", help="--in-process: count instructions (valgrind)")
    parser.add_argument("--legacy", action="store_true", help="--in-process: 2025-11-25 calls in a session")
    parser.add_argument(
        "--wire", action="store_true", help="--in-process: list what the calls send to PostgreSQL/Redis"
    )
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pairs is None:
        args.pairs = 3 if args.in_process else 1
    if args.child:
        child(args.child, os.environ["BENCH_ORGS_TOKEN"], args.callgrind, args.legacy, args.wire)
        return
    suffix = secrets.token_hex(4)
    one, many = f"bench_orgs_one_{suffix}", f"bench_orgs_many_{suffix}"
    admin(f'CREATE DATABASE "{one}"')
    servers: dict[str, topology.Server] = {}
    pairs: list[dict[str, dict]] = []
    try:
        token = build(one, many)
        if args.in_process:
            in_process(args, one, many, token)
            return

        rows = {
            "ours-1": ("ours-1", "ours"),
            "ours-1-modern": ("ours-1", "modern"),
            "ours-10k": ("ours-10k", "ours"),
            "ours-10k-modern": ("ours-10k", "modern"),
            "sdk-stateful": ("sdk-stateful", "sdk-stateful"),
            "sdk-modern": ("sdk-stateful", "modern"),
        }
        totals = {name: new_total() for name in rows}
        servers["sdk-stateful"] = topology.sdk("sdk-stateful", topology.free_port(), stateless=False)
        servers["sdk-stateful"].wait_ready()
        for pair in range(args.pairs):  # fresh processes of ours each pair: two of one server differ
            starts = (("ours-1", one, "orgs1"), ("ours-10k", one if args.control else many, "orgs10k"))
            for name, database, prefix in starts if pair % 2 == 0 else starts[::-1]:
                servers[name] = topology.gunicorn(
                    name,
                    1,
                    topology.free_port(),
                    DATABASE_URL=database_url(database),
                    CACHE_KEY_PREFIX=f"{prefix}-{suffix}",
                    DB_POOL_MAX_SIZE="3",
                )
            for name in ("ours-1", "ours-10k"):
                servers[name].wait_ready()
                if pair == 0:
                    print(f"{name}: whoami acts for {asyncio.run(whoami(servers[name].port, token))}")
            pair_totals = {name: new_total() for name in rows}
            for server_name, kind in rows.values():  # warm up: caches, pools, imports, the registry
                asyncio.run(topology.run_calls(servers[server_name].port, token, kind, 1.0, 4))
            for round_ in range(args.rounds):
                for name in round_order(list(rows), round_):
                    server_name, kind = rows[name]
                    server = servers[server_name]
                    time.sleep(args.settle)  # the previous row's server done with its calls' after-work
                    cpu, other, started = server.cpu(), elsewhere(), time.monotonic()
                    tally, bad = asyncio.run(
                        topology.run_calls(server.port, token, kind, args.seconds, args.connections)
                    )
                    elapsed = time.monotonic() - started
                    after = elsewhere()
                    for total in (totals[name], pair_totals[name]):
                        for key, value in after.items():
                            total["other"][key] = total["other"].get(key, 0.0) + value - other[key]
                        total["seconds"] += elapsed
                        total["cpu"] += server.cpu() - cpu
                        total["tally"].merge(tally)
                        total["bad"] += bad
                        total["rounds"].append(len(tally.latencies) / elapsed)
            pairs.append(pair_totals)
            if args.pairs > 1:
                print(f"pair {pair + 1}: " + pair_summary(pair_totals), flush=True)
            for name in ("ours-1", "ours-10k"):
                servers.pop(name).stop()
    finally:
        for server in servers.values():
            server.stop()
        close_django()
        for name in (many, one):
            admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    print(
        f"\n== tools/call echo, {args.connections} connections, {args.rounds} interleaved rounds x {args.seconds}s, "
        "1 server process each"
    )
    print(f"{'server':16} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/call':>12} {'errors':>7}  req/s per round")
    figures = {}
    for name, total in totals.items():
        tally = total["tally"]
        count = len(tally.latencies)
        rps = count / total["seconds"] if total["seconds"] else 0.0
        cpu_ms = 1000 * total["cpu"] / count if count else float("nan")
        figures[name] = (rps, cpu_ms)
        print(
            f"{name:16} {rps:8.0f} {1000 * percentile(tally.latencies, 0.5):8.1f} "
            f"{1000 * percentile(tally.latencies, 0.99):8.1f} {cpu_ms:12.2f} {total['bad'] + tally.errors:7d}  "
            + " ".join(f"{rate:.0f}" for rate in total["rounds"])
        )

    print(
        f"\n{'server':16} CPU us per call elsewhere: {'postgres':>9} {'redis':>7} {'client':>7} "
        f"{'machine':>8} (all cores; the server's own: above)"
    )
    for name, total in totals.items():
        count = len(total["tally"].latencies) or 1
        other = {key: 1e6 * value / count for key, value in total["other"].items()}
        print(
            f"{name:16} {'':27}{other['postgres']:9.1f} {other['redis']:7.1f} {other['client']:7.1f} "
            f"{other['machine']:8.1f}"
        )

    def ratio(name: str, ref: str) -> tuple[float, float]:
        (rps, cpu_ms), (ref_rps, ref_cpu) = figures[name], figures[ref]
        paired = sorted(a / b for a, b in zip(totals[name]["rounds"], totals[ref]["rounds"], strict=True))
        print(
            f"  {name} / {ref}: {rps / ref_rps:.2f} x req/s (per round: median {paired[len(paired) // 2]:.2f} x), "
            f"{cpu_ms / ref_cpu:.2f} x CPU per call"
        )
        return rps / ref_rps, cpu_ms / ref_cpu

    for era, sdk_row, suffix_ in (("2025-11-25", "sdk-stateful", ""), ("2026-07-28", "sdk-modern", "-modern")):
        print(f"{era}:")
        single = ratio(f"ours-1{suffix_}", sdk_row)
        scaled = ratio(f"ours-10k{suffix_}", sdk_row)
        print(
            f"  10,000 organizations vs 1: the req/s ratio against the SDK is {scaled[0] / single[0]:.3f} x "
            f"({100 * (scaled[0] / single[0] - 1):+.1f} %), CPU per call {scaled[1] / single[1]:.3f} x"
        )
        if len(pairs) > 1:
            per_pair = [scale_ratios(totals_)[era] for totals_ in pairs]
            rps = sorted(r for r, _ in per_pair)
            cpu = sorted(c for _, c in per_pair)
            print(
                f"  over {len(pairs)} pairs of fresh processes: req/s ratio median {statistics.median(rps):.3f} x "
                f"({', '.join(f'{r:.3f}' for r in rps)}), CPU per call median {statistics.median(cpu):.3f} x "
                f"({', '.join(f'{c:.3f}' for c in cpu)})"
            )


if __name__ == "__main__":
    main()
