"""``make serve``: the production topology on one machine, in the foreground.

Starts and supervises, until Ctrl-C or SIGTERM (or one of them dies):

* gunicorn with ``WORKERS`` uvicorn workers (``uvicorn_worker.UvicornWorker``) on HOST:PORT,
  each with a bounded PostgreSQL pool of ``DB_POOL_MAX_SIZE`` connections. Gunicorn rather than
  ``uvicorn --workers``: its listening socket has TCP_NODELAY, so keep-alive requests do not
  wait ~40 ms for a delayed ACK (measured: p50 6.4 ms vs 52 ms, bench/README in the main README);
* a Celery worker (``CELERY_CONCURRENCY`` processes, pool ``DB_POOL_MAX_SIZE_CELERY`` each);
* Celery beat (reconciler, expiry, cleanup; schedule file in .local/).

Before that (:func:`prepare`) it creates the PostgreSQL database when missing, migrates and
collects the static files. Secrets for this machine (DJANGO_SECRET_KEY, ELICITATION_ENCRYPTION_KEYS,
MCP_REQUEST_STATE_KEYS) are read from the environment or kept in .local/ (created once, mode 0600).

Where TLS terminates (:func:`transport_problem`; docs/how-to/production.md): behind a TLS proxy
(``DJANGO_SECURE_PROXY_SSL_HEADER``, an https ``MCP_BASE_URL``, ``DJANGO_ALLOWED_HOSTS``), or over
plain http on loopback with ``DJANGO_INSECURE_LOOPBACK_HTTP=1``. Anything else exits with status 2
before starting a thing, instead of serving a site whose every page redirects to an https nobody serves.

No demo account: ``SERVE_DEMO_SUPERUSER=1`` (loopback switch only) creates or resets
DEMO_USERNAME / DEMO_PASSWORD as a superuser, as ``make run`` does; otherwise create an
administrator with ``manage.py createsuperuser``.

Environment: DATABASE_URL, REDIS_URL, CELERY_BROKER_URL (default: REDIS_URL), HOST, PORT,
WORKERS, DB_POOL_MAX_SIZE, DB_POOL_MAX_SIZE_CELERY, CELERY_CONCURRENCY, MCP_BASE_URL,
DJANGO_ALLOWED_HOSTS, DJANGO_SECURE_PROXY_SSL_HEADER, DJANGO_INSECURE_LOOPBACK_HTTP, SERVE_DEMO_SUPERUSER.

Rolling restart (new code, new settings, no failed request): ``kill -HUP <pid of make serve>``
(printed at start). The signal goes to gunicorn's master, which starts WORKERS new workers and
sends SIGTERM to the old ones; those drain (mcp_oauth.mcp_server.drain): open GET and listen streams end
with an SSE ``retry:`` hint and the clients reconnect to the new workers, requests in flight
finish. The listening socket stays open throughout, so no connection is refused.
"""

from __future__ import annotations

import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from django.http.request import validate_host

from mcp_oauth.shared.loopback import is_loopback_host

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"
LOOPBACK_SWITCH = "DJANGO_INSECURE_LOOPBACK_HTTP"
PROXY_HEADER = "DJANGO_SECURE_PROXY_SSL_HEADER"
DEMO_SWITCH = "SERVE_DEMO_SUPERUSER"
DEFAULT_ALLOWED_HOSTS = "127.0.0.1,localhost,[::1]"  # project/settings.py's default
TWO_WAYS = (
    "Choose where TLS terminates:\n"
    "  behind a TLS proxy: MCP_BASE_URL=https://<public host> DJANGO_ALLOWED_HOSTS=<public host> "
    f"{PROXY_HEADER}=HTTP_X_FORWARDED_PROTO (the proxy sets X-Forwarded-Proto: https);\n"
    f"  plain http on this machine only: {LOOPBACK_SWITCH}=1 (HOST and MCP_BASE_URL on loopback; "
    "no https redirect, no HSTS, cookies without Secure).\n"
    "See docs/how-to/production.md (Run in production behind TLS)."
)


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
            print(f"created database {name}", flush=True)


def _netloc(host: str, port: str) -> str:
    """``host:port``, an IPv6 literal in brackets."""
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


def environment() -> dict[str, str]:
    """The environment of every process: ``os.environ`` with the defaults of this machine
    (no secret yet: :func:`with_secrets`)."""
    env = dict(os.environ)
    env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/mcp_authz")
    env.setdefault("REDIS_URL", "redis://127.0.0.1:6379/0")
    env.setdefault("CELERY_BROKER_URL", env["REDIS_URL"])
    env.setdefault("HOST", "127.0.0.1")
    env.setdefault("PORT", "8000")
    env.setdefault("MCP_BASE_URL", f"http://{_netloc(env['HOST'], env['PORT'])}")
    env.setdefault("DJANGO_DEBUG", "0")
    env.setdefault("MCP_LOG_LEVEL", "WARNING")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def with_secrets(env: dict[str, str]) -> dict[str, str]:
    """``env`` with DJANGO_SECRET_KEY, ELICITATION_ENCRYPTION_KEYS and MCP_REQUEST_STATE_KEYS: the
    environment's, else generated once into .local/ (mode 0600) and kept across restarts."""
    from cryptography.fernet import Fernet

    env = dict(env)
    env.setdefault("DJANGO_SECRET_KEY", _kept_secret("serve-secret-key", lambda: secrets.token_urlsafe(50)))
    env.setdefault(
        "ELICITATION_ENCRYPTION_KEYS",
        _kept_secret("elicitation-keys", lambda: Fernet.generate_key().decode()).split()[0],
    )
    env.setdefault("MCP_REQUEST_STATE_KEYS", _kept_secret("request-state-keys", lambda: secrets.token_urlsafe(48)))
    return env


def transport_problem(env: dict[str, str]) -> str | None:
    """Why this environment would serve a broken site, or None. Without DEBUG the site redirects
    http to https and sets Secure cookies, so it needs TLS in front (a proxy named by
    DJANGO_SECURE_PROXY_SSL_HEADER, an https MCP_BASE_URL among DJANGO_ALLOWED_HOSTS) or the
    loopback switch (HOST, MCP_BASE_URL and DJANGO_ALLOWED_HOSTS on loopback: RFC 8252 §8.3)."""
    base = env["MCP_BASE_URL"]
    base_host = urlsplit(base).hostname or ""
    allowed = [host.strip() for host in env.get("DJANGO_ALLOWED_HOSTS", DEFAULT_ALLOWED_HOSTS).split(",")]
    if env.get(LOOPBACK_SWITCH) == "1":
        if env.get(PROXY_HEADER):
            return f"{LOOPBACK_SWITCH}=1 and {PROXY_HEADER} are both set: plain http on loopback, or TLS at a proxy?"
        off_loopback = [
            f"{name}={value}"
            for name, value in (("HOST", env["HOST"]), ("MCP_BASE_URL", base))
            if not is_loopback_host(urlsplit(value).hostname if "://" in value else value)
        ] + [f"DJANGO_ALLOWED_HOSTS names {host}" for host in allowed if not is_loopback_host(host)]
        if off_loopback:
            return (
                f"{LOOPBACK_SWITCH}=1 serves plain http on loopback only, not with "
                + ", ".join(off_loopback)
                + ".\n"
                + TWO_WAYS
            )
    elif env.get(DEMO_SWITCH) == "1":
        return f"{DEMO_SWITCH}=1 (a superuser with the demo password) is for {LOOPBACK_SWITCH}=1 only."
    elif env["DJANGO_DEBUG"] != "1":
        if not env.get(PROXY_HEADER):
            return (
                f"Without DEBUG every http request is redirected to https, and nothing here serves https.\n{TWO_WAYS}"
            )
        if urlsplit(base).scheme != "https":
            return f"Behind a TLS proxy MCP_BASE_URL must be the https URL clients use, not {base}.\n{TWO_WAYS}"
    if not validate_host(f"[{base_host}]" if ":" in base_host else base_host, allowed):  # Django's IPv6 form
        return f"DJANGO_ALLOWED_HOSTS ({','.join(allowed)}) does not name the host of MCP_BASE_URL ({base_host})."
    return None


def prepare(env: dict[str, str]) -> None:
    """Before any worker starts: the database (created when missing, migrated), the static files
    (``collectstatic``: the admin's CSS, served by WhiteNoise with hashed names), and the demo
    superuser only when asked (SERVE_DEMO_SUPERUSER=1). :raises subprocess.CalledProcessError: a step failed."""
    if urlsplit(env["DATABASE_URL"]).scheme.startswith("postgres"):
        _ensure_database(env["DATABASE_URL"])
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    if env.get(DEMO_SWITCH) == "1":
        subprocess.run([*manage, "ensure_demo_user", "--superuser"], cwd=ROOT, env=env, check=True)


def database_assignment(url: str) -> str:
    """``DATABASE_URL=…`` for a command the operator copies from the banner (without it,
    ``manage.py`` would use the embedded SQLite database). A URL with a password is not printed."""
    if urlsplit(url).password:
        return "DATABASE_URL=<the DATABASE_URL of make serve>"
    return f"DATABASE_URL={shlex.quote(url)}"


def banner(env: dict[str, str]) -> str:
    """What is served where, and how to get an administrator."""
    if env.get(DEMO_SWITCH) == "1":
        admin = f"admin: {env['MCP_BASE_URL']}/admin/ as {env.get('DEMO_USERNAME', 'demo')} (the demo password)"
    else:
        admin = (
            f"admin: {env['MCP_BASE_URL']}/admin/; create an administrator in this database with\n"
            f"    {database_assignment(env['DATABASE_URL'])} {sys.executable} manage.py createsuperuser   "
            "(or DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_EMAIL, DJANGO_SUPERUSER_PASSWORD with createsuperuser --noinput)"
        )
    return (
        f"\n  MCP server: {env['MCP_BASE_URL']}/mcp   ({env.get('WORKERS', '2')} ASGI workers, "
        f"pool {env.get('DB_POOL_MAX_SIZE', '8')} each; Celery worker + beat on {env['CELERY_BROKER_URL']})\n"
        f"  {admin}\n"
    )


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
                _netloc(env["HOST"], env["PORT"]),
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
    problem = transport_problem(env)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    env = with_secrets(env)
    prepare(env)
    processes = {name: subprocess.Popen(argv, cwd=ROOT, env=penv) for name, argv, penv in commands(env)}
    print(banner(env), flush=True)
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
