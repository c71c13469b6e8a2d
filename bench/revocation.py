"""How long a revocation made by another process takes to reach every worker (issue 34).

Two runtime shapes, each started here on free loopback ports:

``embedded``    ``make run``: one uvicorn process, SQLite, no Redis (the token cache is the
                process's own ``LocMemCache``: honoured through the revocation stamp,
                ``REVOCATION_CHECK_SECONDS``).
``production``  ``make serve``: gunicorn with 2 uvicorn workers, PostgreSQL, Redis (the shared
                token cache: tombstones).

For each change (``user_deleted``: ``User.delete()``; ``token_revoked``: RFC 7009, the access
token's ``revoke()``; ``grant_revoked``: ``revoke_user_grants()``, the connected-apps
"disconnect"; ``client_deleted``: ``Application.delete()``), made by a *separate process* (a
small Django script, ``--changer``, fed one command per line like a ``manage.py shell``), each
trial mints a fresh token, warms it on every worker (200 on a keep-alive connection pinned to
each worker process, found through ``/proc``), makes the change, and probes every worker until
each answers 401: the time from the change's commit (``time.monotonic()``, one clock for every
process of the machine) to the last worker's first 401. A worker that answers 200 again after
its 401, or any 5xx, is counted. Trials alternate the eras: ``tools/call whoami`` as a
2026-07-28 stateless call, or as a 2025-11-25 call in a session opened before the change (both
read-only: no write that would fail on a deleted user and reveal the change sooner).

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/scratch REDIS_URL=redis://127.0.0.1:6379/7 \\
        .venv/bin/python bench/revocation.py [--trials 100] [--embedded-trials 25] [--only embedded]

``DATABASE_URL`` and ``REDIS_URL`` are the production shape's (the embedded one uses a fresh
SQLite file). Not a test: nothing is asserted (``tests/topology/test_revocation_cross_process.py`` is).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.loadgen import percentile  # noqa: E402
from bench.prod_topology import FERNET, Server, free_port  # noqa: E402
from tests.support.pinned_workers import Worker  # noqa: E402

CHANGES = ("user_deleted", "token_revoked", "grant_revoked", "client_deleted")
ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
OLD = "2025-11-25"


# --- the separate process that makes the changes ----------------------------------------------


def changer() -> None:
    """``--changer``: a Django process reading one JSON command per line on stdin, answering one
    JSON line each: ``{"op": "mint"}`` -> ``{"token", "user", "client"}``; ``{"op": "change",
    "kind", "user", "client"}`` -> ``{"committed": time.monotonic() after the commit}``."""
    import secrets
    from datetime import timedelta

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    resource = ensure_default_resource()
    User, Application, AccessToken = get_user_model(), get_application_model(), get_access_token_model()
    print(json.dumps({"ready": True, "resource": resource.uri}), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "mint":
            name = "rev-" + uuid.uuid4().hex[:12]
            user = User.objects.create_user(name, password=None)
            client = Application.objects.create(
                name=name,
                client_type=Application.CLIENT_PUBLIC,
                authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
                redirect_uris="http://127.0.0.1/callback",
            )
            raw = secrets.token_urlsafe(32)
            token = AccessToken(
                user=user,
                application=client,
                scope="mcp",
                expires=timezone.now() + timedelta(hours=1),
                resource=[resource.uri],
            )
            set_token_value(token, raw)
            token.save()
            print(json.dumps({"token": raw, "user": user.pk, "client": client.pk}), flush=True)
            continue
        kind, user = command["kind"], User.objects.get(pk=command["user"])
        with transaction.atomic():
            if kind == "user_deleted":
                user.delete()
            elif kind == "token_revoked":
                for token in AccessToken.objects.filter(user=user):
                    token.revoke()  # RFC 7009: the row is deleted
            elif kind == "grant_revoked":
                revoke_user_grants(user, reason="user_disconnected")
            elif kind == "client_deleted":
                Application.objects.get(pk=command["client"]).delete()
        print(json.dumps({"committed": time.monotonic()}), flush=True)


class Changer:
    """The ``--changer`` process."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--changer"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.resource = self._read()["resource"]

    def _read(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError("the changer exited")
        return json.loads(line)

    def ask(self, **command: object) -> dict:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        return self._read()

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=10)


def _modern(token: str) -> tuple[dict, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "whoami"})
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "whoami", "_meta": meta}}, headers


def open_session(worker: Worker, token: str) -> str:
    """A 2025-11-25 session of ``token`` (``initialize``): its ``Mcp-Session-Id``."""
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": OLD, "capabilities": {}, "clientInfo": {"name": "rev", "version": "1"}},
    }
    status, session = worker.post(body, headers, want="mcp-session-id")
    if status != 200 or not session:
        raise RuntimeError(f"initialize answered {status}")
    return session


def probe(worker: Worker, token: str, era: str, session: str | None) -> int:
    """One ``tools/call whoami`` of ``era``: 2026-07-28 stateless, or 2025-11-25 in ``session``."""
    if era == MODERN:
        body, headers = _modern(token)
    else:
        headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
        headers.update({"MCP-Protocol-Version": OLD, "Mcp-Session-Id": session or ""})
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
    return worker.post(body, headers)[0]


# --- the shapes -------------------------------------------------------------------------------


def base_env(database_url: str, port: int, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": database_url,
        "MCP_BASE_URL": f"http://127.0.0.1:{port}",
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
        "DJANGO_SECRET_KEY": "revocation-bench-" + "k" * 40,
        "ELICITATION_ENCRYPTION_KEYS": FERNET,
        "MCP_LOG_LEVEL": "WARNING",
        "DB_POOL_MAX_SIZE": "2",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "MCP_WAKEUP_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def migrate(env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)


def start_embedded(port: int, env: dict[str, str]) -> tuple[Server, list[int]]:
    argv = [str(Path(sys.executable).parent / "uvicorn"), "project.asgi:application", "--port", str(port)]
    server = Server("embedded", argv + ["--host", "127.0.0.1"], port, env).wait_ready()
    return server, [server.process.pid]


def start_production(port: int, env: dict[str, str]) -> tuple[Server, list[int]]:
    argv = [str(Path(sys.executable).parent / "gunicorn"), "project.asgi:application"]
    argv += ["-k", "uvicorn_worker.UvicornWorker", "-w", "2", "-b", f"127.0.0.1:{port}"]
    argv += ["--keep-alive", "75", "--log-level", "warning"]
    server = Server("production", argv, port, env).wait_ready()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        workers = [pid for pid in server.pids() if pid != server.process.pid]
        if len(workers) == 2:
            return server, workers
        time.sleep(0.1)
    raise RuntimeError("gunicorn did not start 2 workers")


def run_shape(shape: str, trials: int, database_url: str, redis_url: str | None) -> list[dict]:
    port = free_port()
    extra = {"REDIS_URL": redis_url, "CACHE_KEY_PREFIX": "revbench-" + uuid.uuid4().hex[:8]} if redis_url else {}
    env = base_env(database_url, port, **extra)
    migrate(env)
    changer_process = Changer(env)
    server, pids = (start_production if shape == "production" else start_embedded)(port, env)
    rows = []
    try:
        workers = [Worker(port, pid, pids) for pid in pids]
        for kind in CHANGES:
            rows += trial_set(shape, kind, trials, workers, changer_process)
    finally:
        for worker in workers:
            if worker.connection is not None:
                worker.connection.close()
        server.stop()
        changer_process.stop()
    return rows


def trial_set(shape: str, kind: str, trials: int, workers: list[Worker], changer_process: Changer) -> list[dict]:
    """``trials`` trials of ``kind``, the eras alternating: one row per era (the 5xx and
    "200 after 401" counts are of the whole set)."""
    times_by_era: dict[str, list[float]] = {MODERN: [], OLD: []}
    errors = flips = other = 0
    eras = (MODERN, OLD)
    for number in range(trials):
        era = eras[number % 2]
        minted = changer_process.ask(op="mint")
        token = minted["token"]
        session = open_session(workers[0], token) if era == OLD else None
        for worker in workers:  # cached on every worker
            status = probe(worker, token, era, session)
            errors += status >= 500
            if status != 200:
                raise RuntimeError(f"{shape}: warm-up answered {status}")
        committed = changer_process.ask(op="change", kind=kind, user=minted["user"], client=minted["client"])[
            "committed"
        ]
        first_401: dict[int, float] = {}
        deadline = time.monotonic() + 30
        while len(first_401) < len(workers) and time.monotonic() < deadline:
            for worker in workers:
                status = probe(worker, token, era, session)
                now = time.monotonic()
                errors += status >= 500
                if status == 401:
                    first_401.setdefault(worker.pid, now)
                elif worker.pid in first_401:
                    flips += 1  # accepted again after a 401
                elif status != 200:
                    other += 1
            time.sleep(0.002)
        if len(first_401) < len(workers):
            raise RuntimeError(f"{shape} {kind}: not refused by every worker within 30 s")
        for worker in workers:  # and it stays refused, in both eras
            for again in eras:
                status = probe(worker, token, again, session)
                errors += status >= 500
                flips += status == 200
        times_by_era[era].append(max(first_401.values()) - committed)
    rows = []
    for era, times in times_by_era.items():
        times.sort()
        rows.append(
            {
                "shape": shape,
                "change": kind,
                "era": era,
                "trials": len(times),
                "workers": len(workers),
                "p50_ms": percentile(times, 0.50) * 1000,
                "p99_ms": percentile(times, 0.99) * 1000,
                "max_ms": times[-1] * 1000,
                "5xx": errors,
                "accepted_after_401": flips,
                "other": other,
            }
        )
    return rows


def print_table(rows: list[dict]) -> None:
    header = f"{'shape':<11} {'change':<15} {'era':<10} {'trials':>6} {'workers':>7} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    header += f" {'5xx':>4} {'200 after 401':>13}"
    print(header)
    for row in rows:
        print(
            f"{row['shape']:<11} {row['change']:<15} {row['era']:<10} {row['trials']:>6} {row['workers']:>7} {row['p50_ms']:>8.1f}"
            f" {row['p99_ms']:>8.1f} {row['max_ms']:>8.1f} {row['5xx']:>4} {row['accepted_after_401']:>13}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--trials", type=int, default=100, help="trials per change, production shape")
    parser.add_argument("--embedded-trials", type=int, default=30, help="trials per change, embedded shape")
    parser.add_argument("--only", default="embedded,production")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    if args.changer:
        changer()
        return
    rows: list[dict] = []
    shapes = args.only.split(",")
    if "embedded" in shapes:
        folder = tempfile.mkdtemp(prefix="revbench-")
        rows += run_shape("embedded", args.embedded_trials, f"sqlite:///{folder}/db.sqlite3", None)
    if "production" in shapes:
        database_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h_revocation")
        redis_url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/5")
        if not database_url.startswith("postgres"):
            raise SystemExit("the production shape needs DATABASE_URL=postgres://…")
        rows += run_shape("production", args.trials, database_url, redis_url)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
