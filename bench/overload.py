"""Overload proof of the MCP endpoint (issue 30): capacity, then an open-loop burst of N x capacity.

Starts the reference site with ``python -m project.serve`` (``make serve``: gunicorn with 2
uvicorn workers, a Celery worker and beat; PostgreSQL ``DATABASE_URL``, Redis ``REDIS_URL``) on a
free port, mints a bearer token in the same database, then:

1. **knee** (``--knee``): closed-loop ``tools/call`` with 1, 2, 4 … ``--knee-max`` concurrent
   connections and the in-flight bound off: calls/s and p50/p99 at each step. The capacity knee
   is the smallest concurrency reaching 95 % of the best throughput; past it only latency grows.
   ``MCP_MAX_IN_FLIGHT`` (per worker) is set above that (see docs/how-to/load-shedding.md).
2. **capacity**: closed-loop ``tools/call`` (2026-07-28 stateless ``echo``) with ``--connections``
   connections for ``--capacity-seconds``: successful calls per second at saturation.
3. **overload**: open loop at ``--factor`` x capacity for ``--seconds`` (requests start on a
   fixed schedule, each on an idle keep-alive connection or a new one, whatever the answers
   do), while ``/readyz`` is probed every 0.2 s. Printed: offered and answered rates, statuses,
   successful calls/s (and its share of capacity), latency p50/p99/max, requests answered
   later than 1 s, timeouts (no answer within ``--timeout``), dropped connections, 503s without
   ``Retry-After`` or without a JSON-RPC error body, the ``/readyz`` statuses and worst latency.

Nothing is asserted (tests/topology/test_overload.py asserts the invariants on a shorter run).
The load itself (closed and open loop, answer checks) is bench/openloop.py.
Every database connection this process opened is closed at the end; the server's go with it.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/h_shed REDIS_URL=redis://127.0.0.1:6379/7 \\
        .venv/bin/python bench/overload.py [--knee] [--factor 5] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loadgen import Connection, percentile  # noqa: E402
from bench.openloop import Result, closed_loop, open_loop  # noqa: E402

__all__ = ["Probes", "Site", "closed_loop", "mint_token", "open_loop", "overload", "probe_readyz", "run"]

DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_shed")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7")


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def _process_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the site -------------------------------------------------------------------------------


class Site:
    """``python -m project.serve`` on a free port (its own process group), stopped with SIGTERM."""

    def __init__(
        self,
        *,
        port: int = 0,
        workers: int = 2,
        max_in_flight: str | None = None,
        cpus: str | None = None,
        **env: str,
    ) -> None:
        self.port = port or free_port()
        self.cpus = cpus
        self.base = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": DATABASE_URL,
            "REDIS_URL": REDIS_URL,
            "CELERY_BROKER_URL": REDIS_URL,
            "CACHE_KEY_PREFIX": f"overload{self.port}",
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "MCP_BASE_URL": self.base,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
            "WORKERS": str(workers),
            "DB_POOL_MAX_SIZE": "4",
            "DB_POOL_MAX_SIZE_CELERY": "1",
            "CELERY_CONCURRENCY": "1",
            "MCP_LOG_LEVEL": "ERROR",
            **env,
        }
        if max_in_flight is not None:
            self.env["MCP_MAX_IN_FLIGHT"] = max_in_flight
        self.log = tempfile.NamedTemporaryFile("w+", prefix="overload-serve-", suffix=".log", delete=False)
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> Site:
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        self.process = subprocess.Popen(
            [*pin, sys.executable, "-m", "project.serve"],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"make serve exited: {self.log_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.base + "/readyz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the site did not get ready: {self.log_text()[-3000:]}")

    def cpu(self) -> float:
        """User + system CPU seconds of the site's processes (gunicorn, its workers, Celery)."""
        return sum(_process_cpu(pid) for pid in _tree(self.process.pid)) if self.process else 0.0

    def log_text(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # serve stops its children (gunicorn, celery)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)

    def __enter__(self) -> Site:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mint_token(base: str) -> str:
    """A bearer token for ``base``/mcp, written in the site's database from this process (Django
    set up here on the same settings; its connections are closed before returning)."""
    os.environ.update(
        {
            "DATABASE_URL": DATABASE_URL,
            "REDIS_URL": REDIS_URL,
            "MCP_BASE_URL": base,
            "DJANGO_DEBUG": "0",
            "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
            "DB_POOL_MAX_SIZE": "1",
        }
    )
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import secrets
    from datetime import timedelta

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    try:
        resource = ensure_default_resource()
        user, _ = get_user_model().objects.get_or_create(username="overload-bench")
        app, _ = get_application_model().objects.get_or_create(
            name="overload-bench",
            defaults={
                "client_type": "public",
                "authorization_grant_type": "authorization-code",
                "redirect_uris": "http://127.0.0.1/callback",
            },
        )
        raw = secrets.token_urlsafe(32)
        token = get_access_token_model()(
            user=user,
            application=app,
            scope="mcp",
            expires=timezone.now() + timedelta(hours=2),
            resource=[resource.uri],
        )
        set_token_value(token, raw)
        token.save()
        return raw
    finally:
        connections.close_all()


# --- load -----------------------------------------------------------------------------------


@dataclass
class Probes:
    statuses: dict[int | str, int] = field(default_factory=dict)
    worst: float = 0.0


async def probe_readyz(port: int, stop: asyncio.Event, probes: Probes, interval: float = 0.2) -> None:
    """GET /readyz every ``interval`` on a fresh connection (as an orchestrator's probe does)."""
    while not stop.is_set():
        started = time.perf_counter()
        connection = Connection("127.0.0.1", port)
        try:
            await connection.open()
            response = await asyncio.wait_for(connection.request("GET", "/readyz", {}), 5)
            key: int | str = response.status
        except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            key = "no answer"
        finally:
            await connection.close()
        probes.statuses[key] = probes.statuses.get(key, 0) + 1
        probes.worst = max(probes.worst, time.perf_counter() - started)
        try:
            await asyncio.wait_for(stop.wait(), interval)
        except TimeoutError:
            pass


async def overload(
    port: int, token: str, rate: float, seconds: float, timeout: float, connections: int = 256
) -> tuple[Result, Probes]:
    stop, probes = asyncio.Event(), Probes()
    prober = asyncio.create_task(probe_readyz(port, stop, probes))
    try:
        result = await open_loop(port, token, rate, seconds, timeout, connections)
    finally:
        stop.set()
        await prober
    return result, probes


def run(coroutine):
    """``asyncio.run`` on uvloop when installed (uvicorn's loop: a leaner load generator)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def summary(result: Result) -> str:
    lat = result.latencies
    return (
        f"sent {result.sent}, answered {len(lat)}, ok {result.ok} ({result.ok / result.seconds:.0f}/s), "
        f"statuses {dict(sorted(result.statuses.items()))}, p50 {percentile(lat, 0.5) * 1000:.1f} ms, "
        f"p99 {percentile(lat, 0.99) * 1000:.1f} ms, max {max(lat, default=0) * 1000:.1f} ms, "
        f"late>1s {result.late}, timeouts {result.timeouts}, dropped {result.dropped}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--knee", action="store_true", help="first find the capacity knee (bound off)")
    parser.add_argument("--knee-max", type=int, default=256)
    parser.add_argument("--knee-seconds", type=float, default=5)
    parser.add_argument("--connections", type=int, default=32, help="capacity: closed-loop connections")
    parser.add_argument("--capacity-seconds", type=float, default=10)
    parser.add_argument("--factor", type=float, default=5)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--open-connections", type=int, default=256, help="overload: keep-alive connections")
    parser.add_argument("--timeout", type=float, default=10, help="a request unanswered this long is a timeout")
    parser.add_argument("--max-in-flight", default=None, help="MCP_MAX_IN_FLIGHT of the site (default: the setting's)")
    parser.add_argument(
        "--worker-class",
        default="",
        help="WORKER_CLASS of make serve (default: its own, the protocol that writes refusals itself; "
        "uvicorn_worker.UvicornWorker: refusals by the ASGI lane)",
    )
    parser.add_argument(
        "--pin",
        default="0:1" if (os.cpu_count() or 1) >= 2 else "",
        help="SERVER_CPUS:CLIENT_CPUS (taskset lists): the site and this load generator on separate cores, "
        "so that the generator's CPU does not eat the capacity it measures ('' : no pinning)",
    )
    args = parser.parse_args()
    server_cpus = client_cpus = None
    if args.pin:
        server_cpus, client_cpus = args.pin.split(":")
        os.sched_setaffinity(0, {int(c) for c in client_cpus.split(",")})
        print(f"site on CPU {server_cpus}, load generator on CPU {client_cpus}")

    port = free_port()  # one port for both sites: the token's resource is BASE_URL/mcp
    if args.knee:
        with Site(port=port, max_in_flight="none", cpus=server_cpus) as site:
            token = mint_token(site.base)
            print("knee (in-flight bound off): concurrency -> calls/s, p50, p99")
            best, rows, concurrency = 0.0, [], 1
            while concurrency <= args.knee_max:
                result = run(closed_loop(site.port, token, concurrency, args.knee_seconds))
                rate = result.ok / result.seconds
                best = max(best, rate)
                rows.append((concurrency, rate))
                print(
                    f"  {concurrency:4d}: {rate:7.0f}/s  p50 {percentile(result.latencies, 0.5) * 1000:7.1f} ms"
                    f"  p99 {percentile(result.latencies, 0.99) * 1000:7.1f} ms  statuses {result.statuses}"
                )
                concurrency *= 2
            knee = next(c for c, rate in rows if rate >= 0.95 * best)
            print(f"knee: {knee} concurrent requests (~{knee / 2:.0f} per worker) reach 95 % of {best:.0f}/s")

    extra = {"WORKER_CLASS": args.worker_class} if args.worker_class else {}
    with Site(port=port, max_in_flight=args.max_in_flight, cpus=server_cpus, **extra) as site:
        token = mint_token(site.base)
        run(closed_loop(site.port, token, 8, 2))  # warm-up: connections, caches
        capacity_cpu = site.cpu()
        result = run(closed_loop(site.port, token, args.connections, args.capacity_seconds))
        capacity_cpu = site.cpu() - capacity_cpu
        capacity = result.ok / result.seconds
        capacity_per_cpu = result.ok / capacity_cpu
        print(
            f"capacity ({args.connections} closed-loop connections, {args.capacity_seconds:.0f} s): {capacity:.0f} calls/s"
            f" ({capacity_per_cpu:.0f} per CPU-second of the site, which had "
            f"{capacity_cpu / result.seconds:.0%} of a core)"
        )
        print(f"  {summary(result)}")
        rate = capacity * args.factor
        generator_cpu, site_cpu = time.process_time(), site.cpu()
        result, probes = run(overload(site.port, token, rate, args.seconds, args.timeout, args.open_connections))
        generator_cpu, site_cpu = time.process_time() - generator_cpu, site.cpu() - site_cpu
        print(f"overload: open loop at {args.factor:g} x capacity = {rate:.0f} req/s offered for {args.seconds:.0f} s")
        print(f"  {summary(result)}")
        print(
            f"  successful {result.ok / result.seconds:.0f}/s = {result.ok / result.seconds / capacity:.0%} of capacity; "
            f"other 5xx {result.other_5xx}; 503 without Retry-After/JSON-RPC body {result.bad_503}; "
            f"429 without Retry-After {result.bad_429}"
        )
        print(f"  /readyz: {probes.statuses}, worst {probes.worst * 1000:.0f} ms")
        answered = max(1, sum(result.statuses.values()))
        print(
            f"  CPU: the site {site_cpu:.1f} s ({site_cpu / args.seconds:.0%} of a core; {1e6 * site_cpu / answered:.0f} us "
            f"per answer), this load generator {generator_cpu:.1f} s ({generator_cpu / args.seconds:.0%} of a core; "
            f"{1e6 * generator_cpu / answered:.0f} us per request)"
        )
        # On a shared machine the site's share of its core moves between the two runs: successful
        # calls per CPU-second of the site, against capacity's, is the comparison that survives it.
        print(
            f"  successful calls per CPU-second of the site: {result.ok / site_cpu:.0f}, "
            f"{result.ok / site_cpu / capacity_per_cpu:.0%} of capacity's"
        )


if __name__ == "__main__":
    main()
