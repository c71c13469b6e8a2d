"""Load harness of the production topology (issue 12), side by side with the official SDK server.

Starts its own servers on free ports against PostgreSQL (``DATABASE_URL``, default the
``wt_prod`` database) and Redis (``REDIS_URL``, default DB 6), runs the chosen scenarios and
prints figures and ratios. Not a test: nothing is asserted. Every pool is bounded so that one
run uses at most 20 PostgreSQL connections.

Scenarios (``--only a,b``; all by default):

``compare``   tools/call echo, C keep-alive connections, one interleaved run of R rounds, both
              MCP eras: ours (gunicorn, 1 uvicorn worker) vs the ``mcp`` SDK server stateful and
              stateless (uvicorn, 1 process, bearer auth against the same token table) vs a bare
              async Django JSON view (gunicorn, 1 worker) vs ours without the bearer check
              (``bench/noauth_asgi.py``: the auth overhead); and 2026-07-28 stateless calls
              (``_meta`` envelope, ``Mcp-Method``/``Mcp-Name``, ``resultType: complete`` checked)
              to ours (``ours-modern``) and to the SDK server (``sdk-modern``), each on the same
              process as its 2025 row. req/s, p50/p99, server CPU per call, ratios: ours-modern /
              sdk-modern, ours / sdk-stateful, ours-modern / ours. With JWT access tokens (RFC 9068;
              ``--no-jwt`` leaves them out): the same server process called with a JWT access token
              in both eras (``ours-jwt``, ``ours-jwt-modern``: the resource opts in, one signing key),
              against the SDK server and against the opaque token.
``overhead``  the auth overhead alone (ours / ours-noauth) from ``--pairs`` fresh pairs of server
              processes, ``--rounds`` interleaved rounds each: the median of the pairs' ratios
              (two processes of one server differ by up to ~15 % here).
``auth``      in-process cost of the bearer check on a warm cache vs the whole request.
``grants``    client_credentials and refresh_token (public client, rotation) on 1 worker:
              grants per CPU-second of the server.
``notify``    completion notification across processes: complete_elicitation() here, event on a
              GET stream served by a gunicorn worker: p50/p99, interleaved, of the notification
              written in the completing transaction (wake-up on commit) and of the same one left
              to a Celery worker in another process (``NOTIFY_IN_TRANSACTION`` off).
``idle``      N idle GET streams on one worker (``--streams``, 5,000): memory per stream, queries/s,
              and the database and Redis connections the server holds while idle.
``sessions``  200 concurrent sessions x 60 s of tools/call on the production topology
              (2 workers): errors, statuses, req/s, p99.
``redeem``    1,000 concurrent redemptions of one authorization code: successes, 4xx, 5xx, drops.

Usage::

    .venv/bin/python bench/prod_topology.py [--only compare] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loadgen import Connection, Tally, percentile, timed  # noqa: E402

DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/wt_prod")
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/6")
BASE = "http://127.0.0.1:18100"  # the resource identifier all servers share (token audience)
FERNET = "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8="
ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": DATABASE_URL,
        "REDIS_URL": REDIS_URL,
        "CELERY_BROKER_URL": REDIS_URL,
        # BENCH_CACHE_KEY_PREFIX: runs that share a Redis database at once keep their keys apart
        "CACHE_KEY_PREFIX": os.environ.get("BENCH_CACHE_KEY_PREFIX", "bench"),
        "MCP_BASE_URL": BASE,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECURE_SSL_REDIRECT": "0",  # plain http on loopback
        "DJANGO_SECRET_KEY": "bench-secret-" + "k" * 40,
        "ELICITATION_ENCRYPTION_KEYS": FERNET,
        "MCP_LOG_LEVEL": "WARNING",
        "MCP_THROTTLE_RATES": json.dumps({"token": None, "register": None, "authorize": None}),
        "DB_POOL_MAX_SIZE": "4",
        **extra,
    }


class Server:
    """A server process tree; ``cpu()`` is the user+system CPU seconds of it and its children."""

    def __init__(self, name: str, argv: list[str], port: int, env: dict[str, str], cwd: Path = ROOT) -> None:
        self.name, self.port = name, port
        # stderr to a file: a pipe nobody reads fills up and blocks a server that logs much.
        self.log = tempfile.NamedTemporaryFile(prefix=f"bench-{name}-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True
        )

    def log_text(self) -> str:
        """What the server wrote to stderr so far."""
        return Path(self.log.name).read_text(errors="replace")

    def wait_ready(self, path: str = "/", timeout: float = 60) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not start")

    def pids(self) -> list[int]:
        found, pending = [], [self.process.pid]
        while pending:
            pid = pending.pop()
            found.append(pid)
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                children = []
            pending += [int(child) for child in children]
        return found

    def tcp_connections(self, remote_port: int) -> int:
        """Established TCP connections of this process tree to ``remote_port`` (e.g. 5432: its
        database connections, pooled or not; 6379: Redis)."""
        inodes = set()
        for pid in self.pids():
            try:
                fds = list(Path(f"/proc/{pid}/fd").iterdir())
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        count = 0
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[2].rsplit(":", 1)[1], 16) == remote_port and fields[9] in inodes:
                    count += 1
        return count

    def cpu(self) -> float:
        total = 0
        for pid in self.pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime, stime (clock ticks)
        return total / os.sysconf("SC_CLK_TCK")

    def rss_kb(self) -> int:
        total = 0
        for pid in self.pids():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


def gunicorn(
    name: str,
    workers: int,
    port: int,
    app: str = "project.asgi:application",
    cwd: Path = ROOT,
    worker: str = "uvicorn_worker.UvicornWorker",
    **env: str,
) -> Server:
    """``cwd``: the source tree served (``--baseline DIR`` serves an earlier checkout next to this one);
    ``worker``: the gunicorn worker class."""
    argv = [
        str(Path(sys.executable).parent / "gunicorn"),
        app,
        "-k",
        worker,
        "-w",
        str(workers),
        "-b",
        f"127.0.0.1:{port}",
        "--backlog",
        "4096",
        "--keep-alive",
        "75",
        "--log-level",
        "warning",
        "--chdir",
        str(cwd),
    ]
    return Server(name, argv, port, server_env(**env), cwd=cwd)


def sdk(name: str, port: int, stateless: bool, **env: str) -> Server:
    argv = [
        sys.executable,
        "bench/sdk_server.py",
        "--port",
        str(port),
        "--database-url",
        DATABASE_URL,
        "--resource",
        BASE + "/mcp",
    ] + (["--stateless"] if stateless else [])
    return Server(name, argv, port, server_env(BENCH_POOL="4", **env))


# --- fixtures in the database -----------------------------------------------------------------


def django_setup() -> None:
    for key, value in server_env(DJANGO_ALLOWED_HOSTS="testserver,127.0.0.1").items():
        os.environ[key] = value
    os.environ["DB_POOL_MAX_SIZE"] = "2"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    ensure_default_resource()


def fixtures() -> dict:
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone
    from oauth2_provider.models import (
        get_access_token_model,
        get_application_model,
        get_refresh_token_model,
        set_token_value,
    )

    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    resource = ensure_default_resource()
    User = get_user_model()
    user, _ = User.objects.get_or_create(username="bench", defaults={"email": "bench@example.com"})
    user.set_password("bench-password")
    user.is_active = True
    user.save()
    Application = get_application_model()
    public, _ = Application.objects.get_or_create(
        name="bench-public",
        defaults={
            "client_type": "public",
            "authorization_grant_type": "authorization-code",
            "redirect_uris": "http://127.0.0.1/callback",
        },
    )
    service = Application(
        name="bench-service", client_type="confidential", authorization_grant_type="client-credentials"
    )
    service_secret = service.client_secret
    service.save()
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()

    def mint(user=user, app=public):
        raw = secrets.token_urlsafe(32)
        token = AccessToken(
            user=user,
            application=app,
            scope="mcp",
            expires=timezone.now() + timedelta(hours=2),
            resource=[resource.uri],
        )
        set_token_value(token, raw)
        token.save()
        return raw, token

    def mint_jwt(user=user, app=public):
        """A JWT access token (RFC 9068) for the resource, signed with the current key, its row
        written as the token endpoint writes it (the resource opts in; a key is created if none)."""
        import time as _time
        from types import SimpleNamespace

        from mcp_oauth.authorization_server.tokens import signing_keys
        from mcp_oauth.authorization_server.tokens.jwt_access import access_token_claims
        from mcp_oauth.models import AccessTokenSigningKey
        from mcp_oauth.resource_server.jwt_keys import key_ring
        from mcp_oauth.shared.access_jwt import sign_access_token

        if not resource.jwt_access_tokens:
            resource.jwt_access_tokens = True
            resource.save()
        if AccessTokenSigningKey.objects.signing() is None:
            signing_keys.rotate(publish_seconds=0)
        key = key_ring().signing_key()
        claims = access_token_claims(
            {"scope": "mcp", "expires_in": 7200},
            SimpleNamespace(client=app, user=user),
            resource,
            int(_time.time()),
        )
        raw = sign_access_token(claims, private_key=signing_keys.private_key(key.private_key), kid=key.kid, alg=key.alg)
        token = AccessToken(
            user=user,
            application=app,
            scope="mcp",
            expires=timezone.now() + timedelta(hours=2),
            resource=[resource.uri],
        )
        set_token_value(token, raw)
        token.save()
        return raw, token

    def refresh_token():
        _, access = mint()
        raw = secrets.token_urlsafe(32)
        refresh = RefreshToken(user=user, application=public, access_token=access, token_family=uuid.uuid4())
        set_token_value(refresh, raw)
        refresh.save()
        return raw

    from django.db import connection

    if connection.vendor == "postgresql":
        # Planner statistics, as autovacuum keeps them on a production server (it may be off on a
        # test server, and the tables of earlier runs would then look empty to the planner).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    return {
        "resource": resource,
        "user": user,
        "public": public,
        "service": service,
        "service_secret": service_secret,
        "mint": mint,
        "mint_jwt": mint_jwt,
        "refresh_token": refresh_token,
    }


# --- MCP client loops -------------------------------------------------------------------------


def mcp_headers(token: str, session: str | None = None, version: bool = True) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    if session:
        headers["Mcp-Session-Id"] = session
    if version:
        headers["MCP-Protocol-Version"] = "2025-11-25"
    return headers


INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


def call_body(n: int) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hello"}}}
    ).encode()


MODERN_VERSION = "2026-07-28"
#: ``params._meta`` of a 2026-07-28 request (MCP 2026-07-28 "Per-request protocol fields"): what
#: the official Python client sends once ``server/discover`` chose the modern era.
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
}


def modern_call_body(n: int) -> bytes:
    """A stateless 2026-07-28 ``tools/call`` of ``echo`` with its ``_meta`` envelope."""
    params = {"name": "echo", "arguments": {"text": "hello"}, "_meta": MODERN_META}
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}).encode()


def modern_headers(token: str) -> dict[str, str]:
    """The headers of that request: no session; version, method and name mirrored in headers."""
    return {
        **mcp_headers(token, version=False),
        "MCP-Protocol-Version": MODERN_VERSION,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "echo",
    }


#: Client kinds that send 2026-07-28 stateless requests (no session, no handshake).
MODERN_KINDS = frozenset({"modern"})


async def open_session(conn: Connection, token: str, kind: str) -> dict[str, str] | None:
    if kind in MODERN_KINDS:
        return modern_headers(token)
    if kind in ("bare", "sdk-stateless"):
        headers = mcp_headers(token, version=kind != "bare")
        return headers
    response = await conn.request("POST", "/mcp", mcp_headers(token, version=False), json.dumps(INIT).encode())
    session = response.headers.get("mcp-session-id")
    if response.status != 200 or not session:
        return None
    headers = mcp_headers(token, session)
    await conn.request("POST", "/mcp", headers, b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    return headers


def ok_call(response, n: int, modern: bool = False) -> bool:
    """A successful echo result for request ``n``; ``modern``: also ``resultType: complete`` (a
    2026-07-28 result, not an ``input_required`` one or a 2025 answer)."""
    if response is None or response.status != 200:
        return False
    try:
        messages = response.json_messages()
    except ValueError:
        return False
    return any(
        m.get("id") == n
        and isinstance(m.get("result"), dict)
        and not m["result"].get("isError")
        and (m["result"].get("content") or [{}])[0].get("text") == "hello"
        and (not modern or m["result"].get("resultType") == "complete")
        for m in messages
    )


async def call_loop(port: int, token: str, kind: str, seconds: float, tally: Tally, bad: list[int]) -> None:
    conn = Connection("127.0.0.1", port)
    try:
        headers = await open_session(conn, token, kind)
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
        headers = None
    if headers is None:
        tally.errors += 1
        return
    modern = kind in MODERN_KINDS
    body = modern_call_body if modern else call_body
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1
        response = await timed(conn, tally, "POST", "/mcp", headers, body(n))
        if not ok_call(response, n, modern):
            bad[0] += 1
    await conn.close()


async def run_calls(port: int, token: str, kind: str, seconds: float, connections: int) -> tuple[Tally, int]:
    tally, bad = Tally(), [0]
    await asyncio.gather(*(call_loop(port, token, kind, seconds, tally, bad) for _ in range(connections)))
    return tally, bad[0]


# --- scenarios --------------------------------------------------------------------------------


#: Rows of ``compare`` that send 2026-07-28 stateless requests: row -> the server process it shares
#: with its 2025-11-25 row (the same process serves both eras: era ratios free of process variance).
MODERN_ROWS = {"ours-modern": "ours", "sdk-modern": "sdk-stateful", "before-modern": "before"}
#: The rows of the servers this script knows (any other is an extra: ``BENCH_EXTRA_APP``).
KNOWN_ROWS = frozenset({"ours", "sdk-stateful", "sdk-stateless", "bare", "ours-noauth", "before", "sdk-traced"})


def scenario_compare(args, fx) -> None:
    token, _ = fx["mint"]()
    jwt_token = None if args.no_jwt else fx["mint_jwt"]()[0]
    starters = {
        "ours": lambda port: gunicorn("ours", 1, port),
        "sdk-stateful": lambda port: sdk("sdk-stateful", port, stateless=False),
        "sdk-stateless": lambda port: sdk("sdk-stateless", port, stateless=True),
        "bare": lambda port: gunicorn(
            "bare", 1, port, app="bench.bare_asgi:application", DJANGO_SETTINGS_MODULE="bench.bare_settings"
        ),
        "ours-noauth": lambda port: gunicorn("ours-noauth", 1, port, app="bench.noauth_asgi:application"),
    }
    if os.environ.get("BENCH_EXTRA_APP"):  # an experiment served next to the others: name=module:app
        extra, app = os.environ["BENCH_EXTRA_APP"].split("=")
        starters[extra] = lambda port: gunicorn(
            extra, 1, port, app=app, PYTHONPATH=os.environ.get("BENCH_EXTRA_PATH", "")
        )
        MODERN_ROWS[f"{extra}-modern"] = extra  # its 2026-07-28 row too
    if os.environ.get("BENCH_SDK_OTLP_ENDPOINT"):  # the SDK server with its own spans exported
        starters["sdk-traced"] = lambda port: sdk(
            "sdk-traced", port, stateless=False, BENCH_SDK_OTLP_ENDPOINT=os.environ["BENCH_SDK_OTLP_ENDPOINT"]
        )
        MODERN_ROWS["sdk-traced-modern"] = "sdk-traced"
    if args.servers:  # a subset, e.g. ours-noauth alone for the auth overhead
        wanted = set(args.servers.split(",")) | {"ours"}
        starters = {name: start for name, start in starters.items() if name in wanted}
    ports = {name: free_port() for name in starters}
    servers = {name: start(ports[name]) for name, start in starters.items()}
    if args.baseline:  # the same scenario served by an earlier source tree, interleaved
        ports["before"] = free_port()
        servers["before"] = gunicorn("before", 1, ports["before"], cwd=Path(args.baseline))
    # row -> (server process, client kind): a server's own name is its 2025-11-25 row (its session
    # kind); the 2026-07-28 rows send stateless tools/call to the same process.
    rows_of: dict[str, tuple[str, str, str]] = {name: (name, name, token) for name in servers}
    for row, server_name in MODERN_ROWS.items():
        if server_name in servers:
            rows_of[row] = (server_name, "modern", token)
    if jwt_token is not None:  # the same process of ours, called with a JWT access token (RFC 9068)
        rows_of["ours-jwt"] = ("ours", "ours", jwt_token)
        rows_of["ours-jwt-modern"] = ("ours", "modern", jwt_token)
    totals = {name: {"tally": Tally(), "cpu": 0.0, "seconds": 0.0, "bad": 0, "rounds": []} for name in rows_of}
    try:
        for server in servers.values():
            server.wait_ready()
        for server_name, kind, row_token in rows_of.values():  # warm up: caches, pools, imports
            asyncio.run(run_calls(servers[server_name].port, row_token, kind, 1.0, 4))
        names = list(rows_of)
        for round_ in range(args.rounds):
            # each round starts with the next row: no row always runs first or after the same one
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                server_name, kind, row_token = rows_of[name]
                server = servers[server_name]
                cpu = server.cpu()
                started = time.monotonic()
                tally, bad = asyncio.run(run_calls(server.port, row_token, kind, args.seconds, args.connections))
                totals[name]["seconds"] += time.monotonic() - started
                totals[name]["cpu"] += server.cpu() - cpu
                totals[name]["tally"].merge(tally)
                totals[name]["bad"] += bad
                totals[name]["rounds"].append(len(tally.latencies) / (time.monotonic() - started))
    finally:
        for server in servers.values():
            server.stop()
    print(
        f"\n== tools/call echo, {args.connections} connections, {args.rounds} interleaved rounds x {args.seconds}s "
        "(1 server process each; a -modern row sends 2026-07-28 stateless requests to the process of its "
        "2025-11-25 row)"
    )
    print(f"{'server':15} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/call':>12} {'errors':>7}  req/s per round")
    rows = {}
    for name, total in totals.items():
        tally = total["tally"]
        count = len(tally.latencies)
        rps = count / total["seconds"] if total["seconds"] else 0
        cpu_ms = 1000 * total["cpu"] / count if count else float("nan")
        rows[name] = (rps, cpu_ms)
        print(
            f"{name:15} {rps:8.0f} {1000 * percentile(tally.latencies, 0.5):8.1f} "
            f"{1000 * percentile(tally.latencies, 0.99):8.1f} {cpu_ms:12.2f} {total['bad'] + tally.errors:7d}  "
            + " ".join(f"{rate:.0f}" for rate in total["rounds"])
        )

    def ratio(name: str, ref: str) -> None:
        if name in rows and ref in rows:
            (rps, cpu_ms), (ref_rps, ref_cpu) = rows[name], rows[ref]
            # the machine's speed drifts between rounds: the ratio of each round's pair is steadier
            paired = sorted(a / b for a, b in zip(totals[name]["rounds"], totals[ref]["rounds"], strict=True))
            print(
                f"{name} / {ref}: {rps / ref_rps:.2f} x req/s (per round: median {paired[len(paired) // 2]:.2f} x, "
                f"from {paired[0]:.2f} to {paired[-1]:.2f}), {cpu_ms / ref_cpu:.2f} x CPU per call"
            )

    extras = [name for name in rows if name not in KNOWN_ROWS and not name.endswith("-modern") and name != "ours-jwt"]
    print("2026-07-28 (stateless):")
    ratio("ours-modern", "sdk-modern")
    ratio("ours-jwt-modern", "sdk-modern")
    ratio("before-modern", "sdk-modern")
    for name in extras:
        ratio(f"{name}-modern", "sdk-modern")
    print("2025-11-25 (sessions):")
    for name in ("ours", "ours-jwt", "sdk-stateless", "bare", "ours-noauth", "before", *extras):
        ratio(name, "sdk-stateful")
    if "ours-jwt" in rows:
        print("JWT access token / opaque token (the same process):")
        ratio("ours-jwt", "ours")
        ratio("ours-jwt-modern", "ours-modern")
    if "sdk-traced" in rows:  # the official SDK with its own tracing on: observed against traced
        print("against the official SDK with its spans exported (sdk-traced):")
        for name in ("ours", *extras):
            ratio(f"{name}-modern", "sdk-traced-modern")
            ratio(name, "sdk-traced")
    print("era against era:")
    ratio("ours-modern", "ours")
    ratio("sdk-modern", "sdk-stateful")
    ratio("before-modern", "before")
    if "ours-noauth" in rows:
        ratio("ours", "ours-noauth")  # the auth overhead
    if "before" in rows:
        print("after / before:")
        ratio("ours", "before")
        ratio("ours-modern", "before-modern")


def scenario_overhead(args, fx) -> None:
    """The auth overhead, ours / ours-noauth, from ``--pairs`` fresh pairs of server processes.

    Two processes of the same server differ by up to ~15 % in req/s on this machine (measured: the
    reference site served twice in one interleaved run, 549 vs 622 req/s), more than the bearer
    check costs; one pair of processes cannot tell them apart. Each pair is started anew, measured
    over ``--rounds`` interleaved rounds, and stopped; the median of the pairs' ratios is the figure.
    """
    token, _ = fx["mint"]()
    ratios: list[tuple[float, float]] = []
    for pair in range(args.pairs):
        starts = [
            ("ours", lambda: gunicorn("ours", 1, free_port())),
            ("ours-noauth", lambda: gunicorn("ours-noauth", 1, free_port(), app="bench.noauth_asgi:application")),
        ]
        if pair % 2:  # every other pair starts the baseline first
            starts.reverse()
        servers = {name: start() for name, start in starts}
        calls = {name: 0 for name in servers}
        cpu = {name: 0.0 for name in servers}
        seconds = {name: 0.0 for name in servers}
        try:
            for server in servers.values():
                server.wait_ready()
            for name, server in servers.items():
                asyncio.run(run_calls(server.port, token, name, 1.0, 4))
            names = list(servers)
            for round_ in range(args.rounds):
                for name in names[round_ % 2 :] + names[: round_ % 2]:
                    server = servers[name]
                    used, started = server.cpu(), time.monotonic()
                    tally, _ = asyncio.run(run_calls(server.port, token, name, args.seconds, args.connections))
                    seconds[name] += time.monotonic() - started
                    cpu[name] += server.cpu() - used
                    calls[name] += len(tally.latencies)
        finally:
            for server in servers.values():
                server.stop()
        rps = {name: calls[name] / seconds[name] for name in servers}
        per_call = {name: cpu[name] / calls[name] for name in servers}
        ratios.append((rps["ours"] / rps["ours-noauth"], per_call["ours"] / per_call["ours-noauth"]))
        print(
            f"pair {pair + 1} ({' first, '.join(servers)} second): ours {rps['ours']:.0f} req/s, "
            f"ours-noauth {rps['ours-noauth']:.0f} req/s -> "
            f"{ratios[-1][0]:.2f} x req/s, {ratios[-1][1]:.2f} x CPU per call"
        )
    by_rate = sorted(ratio for ratio, _ in ratios)
    by_cpu = sorted(ratio for _, ratio in ratios)
    print(
        f"\n== auth overhead, ours / ours-noauth, {args.pairs} pairs of processes x {args.rounds} rounds x "
        f"{args.seconds}s: median {by_rate[len(by_rate) // 2]:.2f} x req/s (from {by_rate[0]:.2f} to "
        f"{by_rate[-1]:.2f}), {by_cpu[len(by_cpu) // 2]:.2f} x CPU per call"
    )


def scenario_auth(args, fx) -> None:
    """In-process: the bearer check with a warm token cache vs its cold (database) path."""
    from django.core.cache import cache
    from django.test import RequestFactory

    from mcp_oauth.resource_server.authentication import authenticate_bearer
    from mcp_oauth.resource_server.cache import TOKEN_PREFIX, resource_by_uri, token_checksum

    token, _ = fx["mint"]()
    resource = resource_by_uri(BASE + "/mcp")
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    n = 2000
    authenticate_bearer(request, resource)
    started = time.process_time()
    for _ in range(n):
        authenticate_bearer(request, resource)
    warm = (time.process_time() - started) / n
    started = time.process_time()
    for _ in range(200):
        cache.delete(TOKEN_PREFIX + token_checksum(token))
        authenticate_bearer(request, resource)
    cold = (time.process_time() - started) / 200
    started = time.process_time()
    for _ in range(n):
        resource_by_uri(BASE + "/mcp")
    registry = (time.process_time() - started) / n
    authenticate_bearer(request, resource)  # the entry again, after the cold loop's last fill
    loop_path = asyncio.run(event_loop_checks(token, n))
    print("\n== bearer check, in process (CPU per call)")
    print(
        f"warm cache (Redis GET + checks): {warm * 1e6:.0f} us; cold (PostgreSQL + cache fill): {cold * 1e6:.0f} us;"
        f" resource registry lookup: {registry * 1e6:.0f} us"
    )
    print(
        "from the event loop (the MCP lane), one MGET each, interleaved: "
        + "; ".join(f"{name} {cpu * 1e6:.0f} us" for name, cpu in loop_path.items())
    )


async def event_loop_checks(token: str, n: int) -> dict[str, float]:
    """CPU per call of the lane's cached bearer check (the token entry kept decoded, and decoded
    every time) and of the same MGET without the check, interleaved in 10 blocks (medians)."""
    import statistics

    from django.test import AsyncRequestFactory

    from mcp_oauth.mcp_server.transport.sessions import session_cache_key
    from mcp_oauth.resource_server import cache as token_cache
    from mcp_oauth.resource_server.authentication import authenticate_bearer_cached

    request = AsyncRequestFactory().post("/mcp", headers={"Authorization": f"Bearer {token}"})
    session_key = session_cache_key(uuid.uuid4().hex)
    token_cache._cache().set(session_key, {"user_id": 1}, 60)
    uri = BASE + "/mcp"

    async def kept() -> None:
        assert await authenticate_bearer_cached(request, uri, [session_key], {}) is not None

    async def decoded() -> None:
        token_cache._decoded.clear()
        assert await authenticate_bearer_cached(request, uri, [session_key], {}) is not None

    async def unchecked() -> None:
        await token_cache.aget_many([session_key])

    variants = {"check, entry kept decoded": kept, "check, entry decoded": decoded, "the MGET alone": unchecked}
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(10):
        for name, call in variants.items():
            started = time.process_time()
            for _ in range(n // 10):
                await call()
            samples[name].append((time.process_time() - started) / (n // 10))
    return {name: statistics.median(values) for name, values in samples.items()}


async def grant_loop(port: int, seconds: float, tally: Tally, body_for, on_ok) -> None:
    conn = Connection("127.0.0.1", port)
    deadline = time.monotonic() + seconds
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    while time.monotonic() < deadline:
        extra, body = body_for()
        response = await timed(conn, tally, "POST", "/oauth/token", {**headers, **extra}, body)
        if response is not None and response.status == 200:
            on_ok(json.loads(response.body))
    await conn.close()


def scenario_grants(args, fx) -> None:
    import base64
    from urllib.parse import urlencode

    sources = [("ours", ROOT)] + ([("before", Path(args.baseline))] if args.baseline else [])
    servers = {label: gunicorn(f"{label}-grants", 1, free_port(), cwd=cwd) for label, cwd in sources}
    results: dict[tuple[str, str], list] = {}
    try:
        for server in servers.values():
            server.wait_ready()
        service, secret = fx["service"], fx["service_secret"]
        basic = "Basic " + base64.b64encode(f"{service.client_id}:{secret}".encode()).decode()
        cc_body = urlencode({"grant_type": "client_credentials", "resource": BASE + "/mcp"}).encode()
        public = fx["public"]

        def run(name, label, make_loops):
            server = servers[name]
            tally = Tally()
            coroutines = make_loops(server.port, tally)  # the ORM work (refresh tokens) happens here, outside the loop

            async def together():
                await asyncio.gather(*coroutines)

            cpu = server.cpu()
            started = time.monotonic()
            asyncio.run(together())
            elapsed, used = time.monotonic() - started, server.cpu() - cpu
            total = results.setdefault((name, label), [0, 0.0, 0.0, {}, 0])
            total[0] += tally.statuses.get(200, 0)
            total[1] += elapsed
            total[2] += used
            for status, count in tally.statuses.items():
                total[3][status] = total[3].get(status, 0) + count
            total[4] += tally.errors

        def cc_loops(port, tally, connections=8, seconds=None):
            return [
                grant_loop(
                    port, seconds or args.seconds, tally, lambda: ({"Authorization": basic}, cc_body), lambda _: None
                )
                for _ in range(connections)
            ]

        def refresh_loops(port, tally):
            loops = []
            for _ in range(8):
                state = {"refresh": fx["refresh_token"]()}

                def body_for(state=state):
                    return {}, urlencode(
                        {
                            "grant_type": "refresh_token",
                            "refresh_token": state["refresh"],
                            "client_id": public.client_id,
                        }
                    ).encode()

                def on_ok(payload, state=state):
                    state["refresh"] = payload["refresh_token"]

                loops.append(grant_loop(port, args.seconds, tally, body_for, on_ok))
            return loops

        # warm up (the first grant of a worker process costs ~1.5 s of imports and set-up)
        for name in servers:
            run(name, "warm-up", lambda port, tally: cc_loops(port, tally, 1, 1.0))
        rounds = args.rounds if args.baseline else 1
        for _ in range(rounds):  # interleaved: the machine's load changes affect both alike
            for name in servers:
                run(name, "client_credentials", cc_loops)
                run(name, "refresh_token (public)", refresh_loops)
    finally:
        for server in servers.values():
            server.stop()
    print(f"\n== grants on 1 worker, 8 connections ({rounds} round(s) of {args.seconds:g} s each)")
    per_core: dict[tuple[str, str], float] = {}
    for (name, label), (ok, elapsed, used, statuses, errors) in results.items():
        if label == "warm-up":
            continue
        per_core[(name, label)] = ok / used if used else float("nan")
        print(
            f"{name:7} {label:24} {ok / elapsed:7.0f} grants/s, {1000 * used / max(ok, 1):6.2f} ms CPU/grant, "
            f"{per_core[(name, label)]:6.0f} grants per CPU-second; statuses {statuses}, drops {errors}"
        )
    if args.baseline:
        for label in ("client_credentials", "refresh_token (public)"):
            before = per_core.get(("before", label)) or float("nan")
            print(f"ours / before, {label}: {per_core.get(('ours', label), float('nan')) / before:.2f} x")


def scenario_redeem(args, fx) -> None:
    for label, cwd in [("ours", ROOT)] + ([("before", Path(args.baseline))] if args.baseline else []):
        redeem_once(args, fx, label, cwd)


def redeem_once(args, fx, label: str, cwd: Path) -> None:
    from django.test import Client

    from tests.support.oauth_helpers import REDIRECT_URI, get_code

    port = free_port()
    server = gunicorn(f"{label}-redeem", 2, port, cwd=cwd).wait_ready()
    try:
        client = Client()
        client.force_login(fx["user"])
        public = fx["public"]
        if REDIRECT_URI not in public.redirect_uris.split():
            public.redirect_uris = f"{public.redirect_uris} {REDIRECT_URI}"
            public.save()
        code, verifier, _ = get_code(client, public, resource=BASE + "/mcp")
        from urllib.parse import urlencode

        body = urlencode(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT_URI,
                "client_id": public.client_id,
                "code_verifier": verifier,
                "resource": BASE + "/mcp",
            }
        ).encode()
        tally = Tally()

        async def one():
            conn = Connection("127.0.0.1", port)
            await timed(
                conn, tally, "POST", "/oauth/token", {"Content-Type": "application/x-www-form-urlencoded"}, body
            )
            await conn.close()

        async def all_at_once():
            await asyncio.gather(*(one() for _ in range(args.redemptions)))

        started = time.monotonic()
        asyncio.run(all_at_once())
        elapsed = time.monotonic() - started
        causes = [
            line.split("answering 503: ", 1)[1][:80]
            for line in server.log_text().splitlines()
            if "answering 503: " in line
        ]
    finally:
        server.stop()
    fivexx = sum(count for status, count in tally.statuses.items() if status >= 500)
    print(
        f"\n== {label}: {args.redemptions} concurrent redemptions of one code (2 workers): statuses {tally.statuses}, "
        f"successes {tally.statuses.get(200, 0)}, 5xx {fivexx}, dropped {tally.errors}, {elapsed:.1f} s, "
        f"p99 {1000 * percentile(tally.latencies, 0.99):.0f} ms"
    )
    if causes:
        counted: dict[str, int] = {}
        for cause in causes:
            counted[cause] = counted.get(cause, 0) + 1
        print("   503 causes (server log): " + "; ".join(f"{n} x {cause}" for cause, n in counted.items()))


def scenario_sessions(args, fx) -> None:
    port = free_port()
    server = gunicorn("ours-2w", 2, port, DB_POOL_MAX_SIZE="8").wait_ready()
    tokens = [fx["mint"]()[0] for _ in range(args.sessions)]
    try:
        for token in tokens[:4]:
            asyncio.run(run_calls(port, token, "ours", 0.5, 1))
        tally, bad = Tally(), [0]

        async def everyone():
            await asyncio.gather(
                *(call_loop(port, token, "ours", args.session_seconds, tally, bad) for token in tokens)
            )

        cpu = server.cpu()
        started = time.monotonic()
        asyncio.run(everyone())
        elapsed, used = time.monotonic() - started, server.cpu() - cpu
    finally:
        server.stop()
    count = len(tally.latencies)
    print(
        f"\n== {args.sessions} concurrent sessions x {args.session_seconds}s tools/call (2 workers, pool 8 each): "
        f"{count} requests, {count / elapsed:.0f} req/s, statuses {tally.statuses}, failed calls {bad[0]}, "
        f"dropped {tally.errors}, p50 {1000 * percentile(tally.latencies, 0.5):.0f} ms, "
        f"p99 {1000 * percentile(tally.latencies, 0.99):.0f} ms, CPU {1000 * used / max(count, 1):.2f} ms/request"
    )


def _pg_counters() -> tuple[int, int]:
    import psycopg

    with psycopg.connect(DATABASE_URL, autocommit=True) as conn:
        name = conn.info.dbname
        xacts = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (name,)
        ).fetchone()[0]
        conns = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (name,)).fetchone()[0]
    return xacts, conns - 1  # minus this connection


def _session_for(fx, token_row) -> str:
    from mcp_oauth.models import McpSession

    return McpSession.objects.create(
        user=fx["user"],
        application=fx["public"],
        resource=fx["resource"],
        protocol_version="2025-11-25",
        client_capabilities={"elicitation": {"url": {}}},
    ).pk


async def _open_stream(port: int, token: str, session: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        f"Accept: text/event-stream\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    )
    writer.write(head.encode())
    status = await reader.readline()
    if b" 200 " not in status:
        raise RuntimeError(f"stream refused: {status!r}")
    while (await reader.readline()) not in (b"\r\n", b""):
        pass
    return reader, writer


def scenario_idle(args, fx) -> None:
    for label, cwd in [("ours", ROOT)] + ([("before", Path(args.baseline))] if args.baseline else []):
        idle_once(args, fx, label, cwd)


def idle_once(args, fx, label: str, cwd: Path) -> None:
    """Memory per stream: (RSS with N streams - RSS with 0) / N, once every stream is open and
    has made its first read. The client side is one asyncio connection per stream."""
    from django.db import connections

    port = free_port()
    server = gunicorn(f"{label}-idle", 1, port, cwd=cwd, MCP_SSE_POLL_INTERVAL_SECONDS="0.25").wait_ready()
    token, row = fx["mint"]()
    sessions = [_session_for(fx, row) for _ in range(args.streams)]
    for conn in connections.all():  # this process holds no connection while it counts the server's
        conn.close()
        if hasattr(conn, "close_pool"):
            conn.close_pool()
    db_port, redis_port = urlsplit(DATABASE_URL).port or 5432, urlsplit(REDIS_URL).port or 6379
    streams = []
    try:
        asyncio.run(run_calls(port, token, "ours", 0.5, 2))

        async def hold():
            base_rss = server.rss_kb()
            refused = 0
            for start in range(0, len(sessions), 200):
                opened = await asyncio.gather(
                    *(_open_stream(port, token, s) for s in sessions[start : start + 200]), return_exceptions=True
                )
                streams.extend(item for item in opened if not isinstance(item, BaseException))
                refused += sum(isinstance(item, BaseException) for item in opened)
            # Settled: every stream made its first read (the headers come before it), i.e. the
            # database saw no more than the safety poll and these probes for 12 s (PostgreSQL
            # flushes an idle backend's counters after 10 s), 180 s at most.
            xacts, _ = _pg_counters()
            for _ in range(15):
                await asyncio.sleep(12)
                later, _ = _pg_counters()
                xacts, settled = later, later - xacts <= 8
                if settled:
                    break
            rss = server.rss_kb()
            threads = sum(
                int(Path(f"/proc/{pid}/status").read_text().split("Threads:")[1].split()[0]) for pid in server.pids()
            )
            await asyncio.sleep(args.idle_seconds)
            xacts_after, _ = _pg_counters()
            held = server.tcp_connections(db_port), server.tcp_connections(redis_port)
            alive = sum(not reader.at_eof() for reader, _ in streams)
            for _, writer in streams:
                writer.close()
            return base_rss, rss, xacts_after - xacts, held, threads, refused, alive

        base_rss, rss, xacts, (db_conns, redis_conns), threads, refused, alive = asyncio.run(hold())
    finally:
        server.stop()
    print(
        f"\n== {label}: {args.streams} idle GET streams on 1 worker ({alive} open at the end, {refused} refused): "
        f"{(rss - base_rss) / args.streams:.1f} KB each (RSS {base_rss / 1024:.0f} -> {rss / 1024:.0f} MB), "
        f"{xacts / args.idle_seconds:.1f} transactions/s on the database while idle ({args.idle_seconds}s; includes "
        f"this harness's 2 probes and the server's safety poll, 1 per WAKEUP_SAFETY_POLL_SECONDS), the server holds "
        f"{db_conns} database connections (its pool) and {redis_conns} Redis connections, {threads} threads"
    )


def scenario_notify(args, fx) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from elicitation.models import Elicitation
    from elicitation.url_mode import complete_elicitation

    port = free_port()
    web = gunicorn("ours-notify", 1, port).wait_ready()
    worker = Server(
        "celery",
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "project",
            "worker",
            "-l",
            "warning",
            "--concurrency",
            "1",
            "--pool",
            "solo",
        ],
        0,
        server_env(DB_POOL_MAX_SIZE="2"),
    )
    from celery import current_app

    current_app.conf.update(broker_url=REDIS_URL, task_always_eager=False)
    token, row = fx["mint"]()
    # Interleaved: the notification written by the completing transaction ("in transaction") and
    # the same one left to the Celery worker ("via Celery", NOTIFY_IN_TRANSACTION off).
    modes = {"in transaction": True, "via Celery": False}
    latencies: dict[str, list[float]] = {mode: [] for mode in modes}
    to_row: dict[str, list[float]] = {mode: [] for mode in modes}
    returned: dict[str, list[float]] = {mode: [] for mode in modes}
    try:
        time.sleep(5)  # the worker connects to the broker

        from asgiref.sync import sync_to_async
        from django.conf import settings
        from django.test import override_settings

        def new_elicitation(session):
            return Elicitation.objects.create(
                mode="url",
                kind="external",
                message="bench",
                target_url="https://pay.example/1",
                user=fx["user"],
                session_id=session,
                expires_at=timezone.now() + timedelta(minutes=5),
            )

        overrides = {
            mode: override_settings(ELICITATION={**settings.ELICITATION, "NOTIFY_IN_TRANSACTION": in_transaction})
            for mode, in_transaction in modes.items()
        }

        async def measure():
            for _ in range(args.notifications):
                for mode in modes:
                    session = await sync_to_async(_session_for)(fx, row)
                    reader, writer = await _open_stream(port, token, session)
                    await reader.readline()  # ": stream open"
                    await reader.readline()
                    elicitation = await sync_to_async(new_elicitation)(session)
                    await sync_to_async(overrides[mode].enable)()
                    await asyncio.sleep(0.05)
                    started, wall = time.monotonic(), time.time()
                    await sync_to_async(complete_elicitation)(elicitation.elicitation_id)
                    returned[mode].append(time.monotonic() - started)
                    while True:
                        line = await asyncio.wait_for(reader.readline(), 10)
                        if line.startswith(b"data:"):
                            latencies[mode].append(time.monotonic() - started)
                            break
                    writer.close()
                    await sync_to_async(overrides[mode].disable)()
                    created = await sync_to_async(_outbox_created_at)(session)
                    if created is not None:
                        to_row[mode].append(created - wall)

        asyncio.run(measure())
    finally:
        web.stop()
        worker.stop()
    print(
        f"\n== completion notification across processes, {args.notifications} samples each, interleaved: "
        f"complete_elicitation() here -> outbox row -> Redis wake-up on commit -> GET stream on a gunicorn worker"
    )
    for mode in modes:
        got, rows, back = latencies[mode], to_row[mode], returned[mode]
        print(
            f"   {mode:>14}: p50 {1000 * percentile(got, 0.5):.0f} ms, p99 {1000 * percentile(got, 0.99):.0f} ms"
            f"; complete_elicitation() returned (committed, wake-up published here): p50 "
            f"{1000 * percentile(back, 0.5):.0f} ms, p99 {1000 * percentile(back, 0.99):.0f} ms; outbox row "
            f"written: p50 {1000 * percentile(rows, 0.5):.0f} ms, p99 {1000 * percentile(rows, 0.99):.0f} ms"
        )
    inside, celery = latencies["in transaction"], latencies["via Celery"]
    print(
        f"   in transaction / via Celery: p50 {percentile(inside, 0.5) / percentile(celery, 0.5):.2f} x, "
        f"p99 {percentile(inside, 0.99) / percentile(celery, 0.99):.2f} x"
    )


def _outbox_created_at(session: str) -> float | None:
    from mcp_oauth.models import McpSessionEvent

    created = McpSessionEvent.objects.filter(session_id=session).values_list("created_at", flat=True).first()
    return created.timestamp() if created is not None else None


SCENARIOS = {
    "compare": scenario_compare,
    "overhead": scenario_overhead,
    "auth": scenario_auth,
    "grants": scenario_grants,
    "notify": scenario_notify,
    "idle": scenario_idle,
    "sessions": scenario_sessions,
    "redeem": scenario_redeem,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SCENARIOS))
    parser.add_argument(
        "--baseline",
        default="",
        help="an earlier source tree to serve next to this one "
        "(compare, redeem, grants: before/after in one interleaved run)",
    )
    parser.add_argument(
        "--servers",
        default="",
        help="compare: only these servers besides ours (ours-noauth,sdk-stateful,sdk-stateless,bare)",
    )
    parser.add_argument("--pairs", type=int, default=5, help="overhead: fresh pairs of server processes")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--no-jwt", action="store_true", help="compare: leave out the JWT access-token rows")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--session-seconds", type=float, default=60)
    parser.add_argument("--redemptions", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--notifications", type=int, default=50)
    args = parser.parse_args()
    django_setup()
    fx = fixtures()
    for name in args.only.split(","):
        SCENARIOS[name.strip()](args, fx)


if __name__ == "__main__":
    main()
