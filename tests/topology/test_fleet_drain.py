"""Taking one host out of a fleet under load (issue 35; docs/how-to/balancer.md).

Two hosts run ``python -m project.serve`` (gunicorn, 2 uvicorn workers, Celery worker and beat)
from copies of the project on the test's PostgreSQL database and Redis, behind a real nginx that
runs deploy/nginx/mcp-fleet.conf (round robin, no stickiness, passive checks, TLS with a throw-away
certificate; tests/support/fleet.py). 20 clients call ``tools/call`` through nginx back to back.

The documented procedure, in each of ``FLEET_DRAIN_RUNS`` runs (default 3): SIGTERM to host B's
whole process group, as systemd stops a service, then B started again, nginx left alone:

* 0 failed calls: no 502, no reset, no other error; nginx logs no request B received and did not
  answer (B serves the connections its kernel had queued when it stops accepting), and meets B's
  refused port, which it retries on A (``proxy_next_upstream error``: nothing was sent);
* B exits 0 within its drain (``SERVE_DRAIN_SECONDS``) plus what is in flight;
* B gets calls again once it serves, and none waited on it more than 1.5 s (or 1.5 times the
  slowest call on A meanwhile, when the shared machine is that busy): not the boot (10-55 s here)
  that a call held in a booting host's backlog would wait; its port refuses connections until a
  worker can answer (project/gunicorn_config.py).

The procedure for a long removal, ``down`` and ``nginx -s reload`` first: nginx sends B nothing
after its drain, and B fails nothing it received.

Skipped unless the test database is PostgreSQL, Redis answers and nginx is installed.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator

import pytest

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from project.serve import DEFAULT_DRAIN_SECONDS, IN_FLIGHT_SECONDS
from tests.support.fleet import NGINX, SYSTEM, Balancer, Host, Load
from tests.support.live import free_port
from tests.support.topology import REDIS_URL, database_url, require_postgres_and_redis
from tests.topology.test_serve_operator import fresh_tree

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

RUNS = int(os.environ.get("FLEET_DRAIN_RUNS", "3"))
CLIENTS = 20
#: A call on a host that serves is answered in tens of milliseconds (hundreds when the machine is
#: busy); one that waits in a booting host's backlog waited seconds (the issue measured 3.6-5.8 s).
BOOT_WAIT_LIMIT = 1.0
#: How much slower than a warm worker's a new worker's first calls may be.
COLD_FACTOR = 1.5
#: ``fail_timeout`` of the shipped upstream servers.
FAIL_TIMEOUT = 5


@pytest.fixture
def fleet(tmp_path, settings, user, public_app, mint_token) -> Iterator[tuple[Balancer, str]]:
    require_postgres_and_redis()
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (apt-get install -y nginx)")
    port = free_port()
    public = f"https://localhost:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": public}
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    shared = {
        **{name: os.environ[name] for name in SYSTEM if name in os.environ},
        "DATABASE_URL": database_url(),
        "REDIS_URL": REDIS_URL,
        "CACHE_KEY_PREFIX": "fleet-" + secrets.token_hex(4),
        "DJANGO_DEBUG": "0",
        "MCP_BASE_URL": public,
        "DJANGO_ALLOWED_HOSTS": "localhost",
        "DJANGO_SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
        "DJANGO_SECRET_KEY": "fleet-test-" + "x" * 40,
        "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
        "MCP_REQUEST_STATE_KEYS": "fleet-request-state-" + "y" * 30,
        "HOST": "127.0.0.1",
        "WORKERS": "2",
        "DB_POOL_MAX_SIZE": "2",  # 2 hosts x (2 workers x 2 + Celery): within the shared connection budget
        "DB_POOL_MAX_SIZE_CELERY": "1",
        "CELERY_CONCURRENCY": "1",
        "MCP_LOG_LEVEL": "WARNING",
    }
    hosts = []
    for name in ("a", "b"):
        host_port = free_port()
        tree = fresh_tree(tmp_path / f"host-{name}")
        hosts.append(Host(name, tree, host_port, {**shared, "PORT": str(host_port)}, tmp_path / f"host-{name}.log"))
    (tmp_path / "nginx").mkdir()
    balancer = Balancer(tmp_path / "nginx", port, hosts)
    try:
        for host in hosts:
            host.start()
        for host in hosts:
            host.wait_ready()
        balancer.start()
        yield balancer, token
    finally:
        balancer.stop()
        for host in hosts:
            if host.process is not None and host.process.poll() is None:
                try:
                    host.stop_group(timeout=40)
                except Exception:  # noqa: BLE001 - whatever happened, nothing is left running
                    host.kill()


def served_by(balancer: Balancer, host: Host, since: float) -> list[float]:
    """Header times of the calls ``host`` answered after ``since`` (epoch seconds)."""
    times = []
    for attempt in balancer.attempts():
        if attempt.at >= since:
            header = attempt.header_time_at(host.address)
            if header is not None:
                times.append(header)
    return times


def answered_at(balancer: Balancer, host: Host, since: float) -> list[float]:
    """When (epoch seconds) ``host`` answered calls after ``since``."""
    return [a.at for a in balancer.attempts() if a.at >= since and a.header_time_at(host.address) is not None]


def wait_limit(balancer: Balancer, since: float) -> float:
    """The longest a call may wait on the host that came back: :data:`BOOT_WAIT_LIMIT`, or the
    slowest call on the host that never stopped in the same time when the shared machine is that
    busy, with half again for the new workers' first calls (cold caches, new pool connections).
    A call held in a booting host's backlog waits for the boot: 10 to 35 s here."""
    a, _ = balancer.hosts
    return COLD_FACTOR * max([BOOT_WAIT_LIMIT, *served_by(balancer, a, since)])


def upstream_errors(balancer: Balancer) -> list[str]:
    """nginx's error lines of a request a host received and did not answer."""
    return [line for line in balancer.error_log() if "reset by peer" in line or "prematurely closed" in line]


def test_a_host_stopped_and_started_with_the_documented_procedure_fails_no_call(fleet):
    """SIGTERM to B's process group, as systemd stops it; nginx learns that B is gone from refused
    connections after B's drain; B started again is found by nginx after ``fail_timeout``."""
    balancer, token = fleet
    _, b = balancer.hosts
    figures = []
    with Load(balancer.public, token, CLIENTS) as load:
        time.sleep(2)
        for run in range(RUNS):
            assert served_by(balancer, b, time.time() - 2), "B serves before it stops"
            stopping = time.monotonic()
            assert b.stop_group() == 0, b.output()
            stopped_in = time.monotonic() - stopping
            assert stopped_in < DEFAULT_DRAIN_SECONDS + IN_FLIGHT_SECONDS, stopped_in
            started = time.time()
            b.start()
            ready_in = b.wait_ready()
            time.sleep(FAIL_TIMEOUT + 2)  # nginx tries a failed host again after fail_timeout
            waits, limit = served_by(balancer, b, started), wait_limit(balancer, started)
            figures.append((run, round(stopped_in, 1), round(ready_in, 1), len(waits), max(waits), limit))
            assert waits, f"run {run}: B got no traffic after it came back"
            assert max(waits) <= limit, (run, sorted(waits)[-5:], limit)
        load.stop()
    refused = sum(1 for line in balancer.error_log() if "(111: Connection refused)" in line)
    print("\nrun, B stopped in s, B ready in s, calls on B after its start, max header time on B, limit:", figures)
    print(
        f"{len(load.answers)} calls, {refused} refused connections retried, {len(load.failures())} failed:",
        [(a.status, a.detail[:80]) for a in load.failures()],
    )
    assert refused >= RUNS  # nginx met B's closed port (while stopped, and while booting)
    assert len(load.answers) > 100 * RUNS
    assert upstream_errors(balancer) == []
    assert load.failures() == []


def test_a_host_marked_down_and_reloaded_first_gets_no_call_after_its_drain(fleet):
    """The procedure for a long removal: ``down`` and ``nginx -s reload``, then SIGTERM. nginx sends
    B nothing after its drain and B fails nothing it received. Every nginx reload closes the idle
    keep-alive connections of its clients; a client that sent a request in that instant gets no
    answer from nginx (measured: 2 in 88,590 calls over 20 reloads; seen as an EOF or as a reset), which is
    nginx's, not B's."""
    balancer, token = fleet
    _, b = balancer.hosts
    lasts = []
    with Load(balancer.public, token, CLIENTS) as load:
        time.sleep(2)
        for _ in range(RUNS):
            marked = time.time()
            balancer.mark(b, down=True)
            assert b.stop_group() == 0, b.output()
            lasts.append(round(max((at - marked for at in answered_at(balancer, b, marked)), default=0.0), 2))
            b.start()
            b.wait_ready()
            balancer.mark(b, down=False)
            time.sleep(3)
        load.stop()
    print(f"\nlast call on B after down + reload (s): {lasts}; {len(load.answers)} calls")
    assert max(lasts) < DEFAULT_DRAIN_SECONDS  # nginx stopped sending to B within its drain
    assert upstream_errors(balancer) == []
    assert [a for a in load.failures() if a.status != 0] == []  # no 502, no other error status
    # nginx closing an idle keep-alive connection as a request arrives on it: the client reads EOF
    # (RemoteProtocolError) or, when the close meets the unread request, a reset (ReadError); a
    # client that reconnects to nginx in the instant of the reload may find no connection made
    # (ConnectError: nothing was sent; met in a run of 126,146 calls over 10 reloads at load average 20).
    failures = [(a.detail, round(a.at - a.sent, 3)) for a in load.failures()]
    assert {detail for detail, _ in failures} <= {
        "RemoteProtocolError: Server disconnected without sending a response.",
        "ReadError: ",
        "ConnectError: All connection attempts failed",
    }, failures
    assert len(failures) <= len(load.answers) // 1000, failures
