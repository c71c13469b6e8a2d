"""``make serve``: the production topology on one machine, in the foreground.

Starts and supervises, until Ctrl-C (or one of them dies):

* gunicorn with ``WORKERS`` uvicorn workers (``uvicorn_worker.UvicornWorker``) on HOST:PORT,
  each with a bounded PostgreSQL pool of ``DB_POOL_MAX_SIZE`` connections. Gunicorn rather than
  ``uvicorn --workers``: its listening socket has TCP_NODELAY, so keep-alive requests do not
  wait ~40 ms for a delayed ACK (measured: p50 6.4 ms vs 52 ms, bench/README in the main README);
* a Celery worker (``CELERY_CONCURRENCY`` processes, pool ``DB_POOL_MAX_SIZE_CELERY`` each);
* Celery beat (reconciler, expiry, cleanup; schedule file in .local/).

Before that it creates the PostgreSQL database when missing, migrates, and makes sure the
demo user exists. Secrets for this machine (DJANGO_SECRET_KEY, ELICITATION_ENCRYPTION_KEYS)
are read from the environment or kept in .local/ (created once, mode 0600).

Environment: DATABASE_URL, REDIS_URL, CELERY_BROKER_URL (default: REDIS_URL), HOST, PORT,
WORKERS, DB_POOL_MAX_SIZE, DB_POOL_MAX_SIZE_CELERY, CELERY_CONCURRENCY, MCP_BASE_URL.

Rolling restart (new code, new settings, no failed request): ``kill -HUP <pid of make serve>``
(printed at start). The signal goes to gunicorn's master, which starts WORKERS new workers and
sends SIGTERM to the old ones; those drain (mcp_oauth.drain): open GET and listen streams end
with an SSE ``retry:`` hint and the clients reconnect to the new workers, requests in flight
finish. The listening socket stays open throughout, so no connection is refused.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"


def _kept_secret(name: str, make) -> str:
    path = LOCAL / name
    if not path.exists():
        LOCAL.mkdir(exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(make() + "\n")
    return path.read_text().strip()


def _ensure_database(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')
            print(f"created database {name}")


def environment() -> dict[str, str]:
    from cryptography.fernet import Fernet

    env = dict(os.environ)
    env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/mcp_authz")
    env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    env.setdefault("CELERY_BROKER_URL", env["REDIS_URL"])
    env.setdefault("HOST", "127.0.0.1")
    env.setdefault("PORT", "8000")
    env.setdefault("MCP_BASE_URL", f"http://{env['HOST']}:{env['PORT']}")
    env.setdefault("DJANGO_DEBUG", "0")
    env.setdefault("DJANGO_SECRET_KEY", _kept_secret("serve-secret-key", lambda: secrets.token_urlsafe(50)))
    env.setdefault(
        "ELICITATION_ENCRYPTION_KEYS",
        _kept_secret("elicitation-keys", lambda: Fernet.generate_key().decode()).split()[0],
    )
    env.setdefault("MCP_LOG_LEVEL", "WARNING")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def commands(env: dict[str, str]) -> list[tuple[str, list[str], dict[str, str]]]:
    python = sys.executable
    bin_dir = Path(python).parent
    workers = env.get("WORKERS", "2")
    celery_env = {**env, "DB_POOL_MAX_SIZE": env.get("DB_POOL_MAX_SIZE_CELERY", "2")}
    return [
        (
            "web",
            [
                str(bin_dir / "gunicorn"),
                "project.asgi:application",
                "-k",
                "uvicorn_worker.UvicornWorker",
                "-w",
                workers,
                "-b",
                f"{env['HOST']}:{env['PORT']}",
                "--backlog",
                "4096",
                "--keep-alive",
                "75",
                "--graceful-timeout",
                "10",
                "--log-level",
                "warning",
            ],
            env,
        ),
        (
            "celery-worker",
            [
                python,
                "-m",
                "celery",
                "-A",
                "project",
                "worker",
                "-l",
                "warning",
                "--concurrency",
                env.get("CELERY_CONCURRENCY", "2"),
            ],
            celery_env,
        ),
        (
            "celery-beat",
            [
                python,
                "-m",
                "celery",
                "-A",
                "project",
                "beat",
                "-l",
                "warning",
                "-s",
                str(LOCAL / "celerybeat-schedule"),
            ],
            celery_env,
        ),
    ]


def forward_restarts(web: subprocess.Popen) -> None:
    """SIGHUP to this supervisor -> SIGHUP to gunicorn's master ``web``: a rolling restart
    (gunicorn's "reload the configuration, start new workers, gracefully shut down old ones")."""

    def restart(*_: object) -> None:
        print(f"rolling restart: SIGHUP -> gunicorn master (pid {web.pid})", flush=True)
        web.send_signal(signal.SIGHUP)

    signal.signal(signal.SIGHUP, restart)
    print(f"  Rolling restart: kill -HUP {os.getpid()}   (forwarded to gunicorn's master, pid {web.pid})\n")


def main() -> int:
    env = environment()
    if urlsplit(env["DATABASE_URL"]).scheme.startswith("postgres"):
        _ensure_database(env["DATABASE_URL"])
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "ensure_demo_user", "--superuser"], cwd=ROOT, env=env, check=True)
    processes = {name: subprocess.Popen(argv, cwd=ROOT, env=penv) for name, argv, penv in commands(env)}
    print(
        f"\n  MCP server: {env['MCP_BASE_URL']}/mcp   ({env.get('WORKERS', '2')} ASGI workers, "
        f"pool {env.get('DB_POOL_MAX_SIZE', '8')} each; Celery worker + beat on {env['CELERY_BROKER_URL']})\n"
    )
    forward_restarts(processes["web"])
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping:
            for name, process in processes.items():
                if process.poll() is not None:
                    print(f"{name} exited with {process.returncode}; stopping the rest")
                    stopping = True
            time.sleep(0.5)
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for process in processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
