"""Two hosts on separate network namespaces, started at the same instant against a missing database:
both serve, and one Celery beat schedules while the other stands by (issue "Many hosts", done when).

Each host is a network namespace of the test's own (``ip netns``) joined to this one by a veth pair
(addresses 10.<a>.<b>.0/30 chosen at random among those not in use here). PostgreSQL and Redis are
reached over the veth address the test made: a TCP forwarder listens there
(tests/support/tcp_forwarder.py) and forwards to the servers on this machine's loopback — a network
hop, as between machines. Each host runs ``python -m project.serve`` (``make serve``: prepare, then
gunicorn with one uvicorn worker, a Celery worker and beat) on 127.0.0.1:8000 of its own namespace,
with the same secrets and its own static files, secrets directory and beat schedule file.

Then: both answer on their loopback (asked from inside their namespace); the beat lease has one
holder (``pg_locks``); exactly one host's output has the ``beat.standby`` warning. SIGTERM stops both.

Skipped unless run as root with ``ip netns`` working, the test database is PostgreSQL and Redis
answers.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from mcp_oauth.beat import LEASE_KEY
from tests.support.tcp_forwarder import TcpForwarder
from tests.support.topology import REDIS_URL
from tests.topology.test_fleet_prepare import AT_ONCE, ROOT, SHARED, admin_url, database_name, drop, url_of  # noqa: F401

pytestmark = [pytest.mark.e2e]

PROBE = (
    "import sys, httpx2; r = httpx2.get('http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp', timeout=3); "
    "print(r.status_code, r.json()['resource'])"
)


def run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def require_netns() -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    name = f"fsprobe{secrets.token_hex(3)}"
    try:
        run("ip", "netns", "add", name)
    except subprocess.CalledProcessError as error:
        pytest.skip(f"ip netns does not work here: {error.stderr.strip()}")
    run("ip", "netns", "del", name)


def free_subnets(count: int) -> list[ipaddress.IPv4Network]:
    """``count`` /30 networks in 10.0.0.0/8 that no address of this machine is in."""
    used = [ipaddress.ip_interface(word) for word in run("ip", "-4", "-o", "addr").split() if "/" in word]
    chosen: list[ipaddress.IPv4Network] = []
    while len(chosen) < count:
        net = ipaddress.ip_network(f"10.{random.randint(100, 250)}.{random.randint(0, 255)}.0/30")
        if not any(iface.network.overlaps(net) for iface in used) and net not in chosen:
            chosen.append(net)
    return chosen


@contextlib.contextmanager
def namespace(net: ipaddress.IPv4Network) -> Iterator[tuple[str, str]]:
    """A network namespace joined by a veth pair: ``(its name, this side's address)``; deleted at the end."""
    tag = secrets.token_hex(3)
    name, outside, inside = f"fleet{tag}", f"fo{tag}", f"fi{tag}"
    here, there = (str(address) for address in list(net.hosts())[:2])
    run("ip", "netns", "add", name)
    try:
        run("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        run("ip", "link", "set", inside, "netns", name)
        run("ip", "addr", "add", f"{here}/30", "dev", outside)
        run("ip", "link", "set", outside, "up")
        run("ip", "netns", "exec", name, "ip", "addr", "add", f"{there}/30", "dev", inside)
        run("ip", "netns", "exec", name, "ip", "link", "set", inside, "up")
        run("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield name, here
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            run("ip", "link", "del", outside)
        run("ip", "netns", "del", name)


def behind(url: str, host: str, port: int) -> str:
    parts = urlsplit(url)
    auth = parts.netloc.rpartition("@")[0]
    return urlunsplit((parts.scheme, f"{auth}@{host}:{port}" if auth else f"{host}:{port}", parts.path, "", ""))


def host_environment(tmp_path: Path, index: int, database: str, redis: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
    return {
        **{key: os.environ[key] for key in keep if key in os.environ},
        "DATABASE_URL": database,
        "REDIS_URL": redis,
        "CELERY_BROKER_URL": redis,
        "CACHE_KEY_PREFIX": f"fleet-netns-{tmp_path.name}",
        "HOST": "127.0.0.1",
        "PORT": "8000",
        "WORKERS": "1",
        "CELERY_CONCURRENCY": "1",
        "DB_POOL_MAX_SIZE": "2",
        "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
        "DJANGO_STATIC_ROOT": str(tmp_path / f"static-{index}"),
        "SERVE_SECRETS_DIR": str(tmp_path / f"secrets-{index}"),
        "SERVE_BEAT_SCHEDULE_FILE": str(tmp_path / f"beat-{index}"),
        "PYTHONUNBUFFERED": "1",
        **SHARED,
    }


def serving(netns: str) -> bool:
    probe = subprocess.run(["ip", "netns", "exec", netns, sys.executable, "-c", PROBE], capture_output=True, text=True)
    return probe.returncode == 0 and probe.stdout.startswith("200 http://127.0.0.1:8000/mcp")


def lease_holders(database: str) -> int:
    with psycopg.connect(database) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND granted", [LEASE_KEY]
        ).fetchone()[0]


def test_two_hosts_in_network_namespaces_started_at_once_both_serve_and_one_beat_schedules(database_name, tmp_path):
    require_netns()
    pg = urlsplit(url_of(database_name))
    redis = urlsplit(REDIS_URL)
    with contextlib.ExitStack() as stack:
        hosts = []
        for index, net in enumerate(free_subnets(2)):
            netns, address = stack.enter_context(namespace(net))
            pg_hop = stack.enter_context(TcpForwarder(pg.port or 5432, pg.hostname or "127.0.0.1", listen_host=address))
            redis_hop = stack.enter_context(
                TcpForwarder(redis.port or 6379, redis.hostname or "127.0.0.1", listen_host=address)
            )
            env = host_environment(
                tmp_path,
                index,
                behind(url_of(database_name), address, pg_hop.port),
                behind(REDIS_URL, address, redis_hop.port),
            )
            hosts.append((netns, env))
        instant = time.time() + 5.0
        processes = []
        try:
            for index, (netns, env) in enumerate(hosts):
                out = (tmp_path / f"host-{index}.out").open("w")
                err = (tmp_path / f"host-{index}.err").open("w")
                processes.append(
                    subprocess.Popen(
                        ["ip", "netns", "exec", netns, sys.executable, "-c", AT_ONCE, str(instant)],
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=err,
                        start_new_session=True,
                    )
                )
            deadline = time.monotonic() + 240
            up = [False, False]
            while not all(up) and time.monotonic() < deadline:
                for index, (netns, _) in enumerate(hosts):
                    assert processes[index].poll() is None, (tmp_path / f"host-{index}.err").read_text()[-3000:]
                    up[index] = up[index] or serving(netns)
                time.sleep(1)
            assert up == [True, True], [(tmp_path / f"host-{i}.err").read_text()[-2000:] for i in range(2)]
            outputs = [(tmp_path / f"host-{i}.out").read_text() for i in range(2)]
            assert sorted(o.count(f"created database {database_name}") for o in outputs) == [0, 1]
            # both beats have ticked by now: one holds the lease, the other stood by and said so
            deadline = time.monotonic() + 60
            standby = [0, 0]
            while sum(standby) == 0 and time.monotonic() < deadline:
                standby = [(tmp_path / f"host-{i}.err").read_text().count('"event": "beat.standby"') for i in range(2)]
                time.sleep(1)
            assert sorted(count > 0 for count in standby) == [False, True]  # (Celery's handler repeats the line)
            assert lease_holders(url_of(database_name)) == 1
        finally:
            for process in processes:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=10)
