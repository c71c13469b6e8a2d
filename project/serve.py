"""``make serve``: the production topology on one machine, in the foreground.

Starts and supervises, until Ctrl-C or SIGTERM:

* gunicorn with ``WORKERS`` uvicorn workers on HOST:PORT (``WORKER_CLASS``, by default
  ``mcp_oauth.mcp_server.transport.uvicorn_shed.UvicornWorker``: uvicorn's worker whose HTTP
  protocol writes the in-flight bound's 503 itself; ``uvicorn_worker.UvicornWorker`` leaves it to
  the ASGI lane),
  each with a bounded PostgreSQL pool of ``DB_POOL_MAX_SIZE`` connections. Gunicorn rather than
  ``uvicorn --workers``: its listening socket has TCP_NODELAY, so keep-alive requests do not
  wait ~40 ms for a delayed ACK (measured: p50 6.4 ms vs 52 ms, bench/README in the main README);
* a Celery worker (``CELERY_CONCURRENCY`` processes, pool ``DB_POOL_MAX_SIZE_CELERY`` each);
* Celery beat (reconciler, expiry, cleanup; schedule file in .local/).

Supervision (:class:`Supervisor`): a process that exits while serve runs (an out-of-memory kill
of the Celery worker, beat, gunicorn's master) is started again after a backoff — 0.5 s, doubled
after each exit that follows a run shorter than 30 s, capped at 30 s — with one log line per
restart on stderr (JSON: ``{"event": "serve.restart", "process": …, "pid": …, "exit_status": …,
"restarts": …, "backoff_seconds": …}``). The other processes keep running: the web tier keeps
serving while the Celery worker is down. Gunicorn restarts its own workers (a killed uvicorn
worker is replaced by the master).

Stopping (:func:`stop_timeouts`; docs/how-to/balancer.md): SIGTERM to serve or to its whole process
group (systemd's stop), or Ctrl-C. The workers drain: readiness answers ``503 draining`` at once,
open SSE streams end with a ``retry:`` hint, every response says ``Connection: close``, and they
keep accepting for ``SERVE_DRAIN_SECONDS`` (default :data:`DEFAULT_DRAIN_SECONDS`; the workers'
``MCP_DRAIN_DELAY_SECONDS``) while a load balancer takes the host out; then they stop accepting,
finish what is in flight (up to 10 s more: gunicorn's ``--graceful-timeout`` is the drain plus 10)
and exit. serve sends SIGTERM to every process once and waits for them (the graceful timeout plus
5 s, then SIGKILL). A started host's port refuses connections until a worker can answer
(project/gunicorn_config.py: a balancer tries another host instead of waiting on a booting one).

Before that (:func:`prepare`) it creates the PostgreSQL database when missing and migrates, once
across every host started at the same time (:func:`migrate`: PostgreSQL advisory locks; skipped
with ``SERVE_MIGRATE=0`` when the deployment runs ``manage.py migrate`` as a step of its own),
collects the static files, checks that this host's secrets match the other hosts'
(``manage.py check_fleet_config``: a mismatch stops serve with status 3, naming the setting), and
empties the metrics directory (``MCP_METRICS=1``: ``PROMETHEUS_MULTIPROC_DIR``,
.local/prometheus-multiproc by default). The secrets every host must share (DJANGO_SECRET_KEY,
ELICITATION_ENCRYPTION_KEYS, MCP_REQUEST_STATE_KEYS) are read from the environment or kept in
``SERVE_SECRETS_DIR`` (.local/ by default; created once, mode 0600); serve prints where each came
from. ``python -m project.serve prepare`` runs the prepare step alone; ``python -m project.serve
migrate`` (``make migrate``) the database step alone. ``SERVE_BEAT=0`` leaves Celery beat out (beat
runs once per deployment; docs/how-to/many-hosts.md).

Where TLS terminates (:func:`transport_problem`; docs/how-to/production.md): behind a TLS proxy
(``DJANGO_SECURE_PROXY_SSL_HEADER``, an https ``MCP_BASE_URL``, ``DJANGO_ALLOWED_HOSTS``), or over
plain http on loopback with ``DJANGO_INSECURE_LOOPBACK_HTTP=1``. Anything else exits with status 2
before starting a thing, instead of serving a site whose every page redirects to an https nobody serves.

No demo account: ``SERVE_DEMO_SUPERUSER=1`` (loopback switch only) creates or resets
DEMO_USERNAME / DEMO_PASSWORD as a superuser, as ``make run`` does; otherwise create an
administrator with ``manage.py createsuperuser``.

Environment: DATABASE_URL, REDIS_URL, CELERY_BROKER_URL (default: REDIS_URL), HOST, PORT,
WORKERS, DB_POOL_MAX_SIZE, DB_POOL_MAX_SIZE_CELERY, CELERY_CONCURRENCY, MCP_BASE_URL,
DJANGO_ALLOWED_HOSTS, DJANGO_SECURE_PROXY_SSL_HEADER, DJANGO_INSECURE_LOOPBACK_HTTP, SERVE_DEMO_SUPERUSER,
SERVE_MIGRATE, SERVE_BEAT, SERVE_SECRETS_DIR, SERVE_BEAT_SCHEDULE_FILE (.local/celerybeat-schedule),
MCP_METRICS (1: Prometheus metrics at /metrics, summed over every process), PROMETHEUS_MULTIPROC_DIR,
MCP_REQUEST_LOG (1: one JSON line per request), SERVE_DRAIN_SECONDS.

Rolling restart (new code, new settings, no failed request): ``kill -HUP <pid of make serve>``
(printed at start). The signal goes to gunicorn's master, which starts WORKERS new workers and
sends SIGTERM to the old ones; those drain (mcp_oauth.mcp_server.transport.drain): open GET and listen streams end
with an SSE ``retry:`` hint and the clients reconnect to the new workers, requests in flight
finish. The listening socket stays open throughout, so no connection is refused.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from cryptography.fernet import Fernet
from django.http.request import validate_host

from mcp_oauth.shared.loopback import is_loopback_host

ROOT = Path(__file__).resolve().parent.parent
LOCAL = ROOT / ".local"
LOOPBACK_SWITCH = "DJANGO_INSECURE_LOOPBACK_HTTP"
PROXY_HEADER = "DJANGO_SECURE_PROXY_SSL_HEADER"
DEMO_SWITCH = "SERVE_DEMO_SUPERUSER"
MIGRATE_SWITCH = "SERVE_MIGRATE"  # 0: prepare leaves the database to a `manage.py migrate` step of its own
BEAT_SWITCH = "SERVE_BEAT"  # 0: no Celery beat on this host (beat runs once per deployment)
SECRETS_DIR = "SERVE_SECRETS_DIR"
#: Advisory lock keys: creating the database (on the server's ``postgres`` database), migrating
#: (on the target database). Session-level: released by PostgreSQL when the holder's connection ends.
CREATE_LOCK, MIGRATE_LOCK = 0x6D63_7063, 0x6D63_706D  # "mcpc", "mcpm"
DEFAULT_ALLOWED_HOSTS = "127.0.0.1,localhost,[::1]"  # project/settings.py's default
DRAIN_SETTING = "SERVE_DRAIN_SECONDS"
#: Seconds a stopped host keeps accepting (readiness 503) before it stops accepting: a reloaded
#: nginx stops sending to a host marked ``down`` within 0.4 s (tests/topology/test_fleet_drain.py),
#: a balancer probing readiness every second and marking a host down after 3 failures within 4 s.
DEFAULT_DRAIN_SECONDS = 5.0
#: Seconds a worker may take, after it stopped accepting, to finish what is in flight.
IN_FLIGHT_SECONDS = 10.0
TWO_WAYS = (
    "Choose where TLS terminates:\n"
    "  behind a TLS proxy: MCP_BASE_URL=https://<public host> DJANGO_ALLOWED_HOSTS=<public host> "
    f"{PROXY_HEADER}=HTTP_X_FORWARDED_PROTO (the proxy sets X-Forwarded-Proto: https);\n"
    f"  plain http on this machine only: {LOOPBACK_SWITCH}=1 (HOST and MCP_BASE_URL on loopback; "
    "no https redirect, no HSTS, cookies without Secure).\n"
    "See docs/how-to/production.md (Run in production behind TLS)."
)


def secrets_dir(env: dict[str, str] | None = None) -> Path:
    """Where generated secrets are kept: ``SERVE_SECRETS_DIR`` (a directory every host reads: a
    shared mount, or a copy made once), else .local/."""
    value = (env if env is not None else os.environ).get(SECRETS_DIR)
    return Path(value) if value else LOCAL


def _kept_secret(name: str, make, directory: Path | None = None) -> str:
    """The secret kept in ``directory/name``, made by ``make()`` when the file is missing. Hosts
    sharing the directory and starting at once all read the one that was linked in first (the
    file appears whole: written aside, then hard-linked to its name, which fails if it exists)."""
    directory = directory or LOCAL
    path = directory / name
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        aside = directory / f".{name}.{os.getpid()}.{secrets.token_hex(4)}"
        descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(make() + "\n")
        try:
            os.link(aside, path)
        except FileExistsError:
            pass  # another host (or process) made it first: use theirs
        finally:
            aside.unlink()
    return path.read_text().strip()


def _create_database(conn: Any, name: str) -> bool:
    """``CREATE DATABASE name`` unless it exists; True when this call created it. "Already exists"
    (another host created it between the check and the statement) is success."""
    if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None:
        return False
    try:
        conn.execute(f'CREATE DATABASE "{name}"')
    except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
        return False
    return True


def _ensure_database(url: str) -> None:
    """The database of ``url``, created when missing. Hosts starting at once take turns: a
    session-level advisory lock (:data:`CREATE_LOCK`) on the server's ``postgres`` database, which
    PostgreSQL releases if the host holding it dies."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (CREATE_LOCK,))
        try:
            if _create_database(conn, name):
                print(f"created database {name}", flush=True)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (CREATE_LOCK,))


def _applied_migrations(conn: Any) -> int:
    """Rows of ``django_migrations`` (0 before the first migration)."""
    if conn.execute("SELECT to_regclass('django_migrations')").fetchone()[0] is None:
        return 0
    return int(conn.execute("SELECT count(*) FROM django_migrations").fetchone()[0])


def migrate(env: dict[str, str]) -> None:
    """``manage.py migrate``, once across the fleet: on PostgreSQL the database is created when
    missing, then the migration runs while this process holds a session-level advisory lock
    (:data:`MIGRATE_LOCK`) on the target database. A host that finds the lock held waits, then
    finds nothing left to apply; the lock of a host that dies is released by PostgreSQL with its
    connection. Prints ``{"event": "serve.migrate", "applied": n, "waited_seconds": s}``.
    :raises subprocess.CalledProcessError: the migration failed."""
    argv = [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v0"]
    url = env.get("DATABASE_URL", "")
    if not urlsplit(url).scheme.startswith("postgres"):
        subprocess.run(argv, cwd=ROOT, env=env, check=True)
        return
    _ensure_database(url)
    with psycopg.connect(url, autocommit=True) as conn:
        asked = time.monotonic()
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
        waited = time.monotonic() - asked
        try:
            before = _applied_migrations(conn)
            subprocess.run(argv, cwd=ROOT, env=env, check=True)
            applied = _applied_migrations(conn) - before
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
    print(json.dumps({"event": "serve.migrate", "applied": applied, "waited_seconds": round(waited, 2)}), flush=True)


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
    if env.get("MCP_METRICS") == "1":
        # prometheus_client's multiprocess mode: every worker and Celery process counts in its own
        # files there, a scrape of any worker sums them (emptied by prepare(), before they start)
        env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(LOCAL / "prometheus-multiproc"))
    return env


#: The secrets every host must share that make serve can generate: (variable, file in
#: SERVE_SECRETS_DIR, generator). ``manage.py check_fleet_config`` compares them across hosts.
GENERATED_SECRETS = (
    ("DJANGO_SECRET_KEY", "serve-secret-key", lambda: secrets.token_urlsafe(50)),
    ("ELICITATION_ENCRYPTION_KEYS", "elicitation-keys", lambda: _fernet_key()),
    ("MCP_REQUEST_STATE_KEYS", "request-state-keys", lambda: secrets.token_urlsafe(48)),
)


def _fernet_key() -> str:
    return Fernet.generate_key().decode()


def with_secrets(env: dict[str, str]) -> dict[str, str]:
    """``env`` with DJANGO_SECRET_KEY, ELICITATION_ENCRYPTION_KEYS and MCP_REQUEST_STATE_KEYS: the
    environment's, else kept in SERVE_SECRETS_DIR (.local/ by default; generated once, mode 0600)."""
    env = dict(env)
    directory = secrets_dir(env)
    for variable, name, make in GENERATED_SECRETS:
        if variable not in env:
            value = _kept_secret(name, make, directory)
            env[variable] = value.split()[0] if variable == "ELICITATION_ENCRYPTION_KEYS" else value
    return env


def secret_sources(before: dict[str, str]) -> list[str]:
    """One line per shared secret saying where it came from (``before``: the environment before
    :func:`with_secrets`): the environment, or a file of SERVE_SECRETS_DIR, which other hosts
    must be given (docs/how-to/many-hosts.md)."""
    directory = secrets_dir(before)
    lines = []
    for variable, name, _ in GENERATED_SECRETS:
        if variable in before:
            lines.append(f"{variable}: from the environment")
        elif directory == LOCAL:
            lines.append(
                f"{variable}: from {directory / name}, made on this machine; every host needs the same "
                f"(set {variable}, or {SECRETS_DIR} to a directory all hosts share)"
            )
        else:
            lines.append(f"{variable}: from {directory / name} ({SECRETS_DIR})")
    return lines


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
    """Before any worker starts: the database (created when missing, migrated once across the
    fleet: :func:`migrate`; skipped with SERVE_MIGRATE=0, for a deployment that runs ``manage.py
    migrate`` as a step of its own), the static files (``collectstatic``: the admin's CSS, served by
    WhiteNoise with hashed names), the fleet's secrets (``manage.py check_fleet_config``: this
    host's secrets must match the other hosts'), and the demo superuser only when asked
    (SERVE_DEMO_SUPERUSER=1). :raises subprocess.CalledProcessError: a step failed (the fleet
    check's message is on stderr)."""
    if env.get("PROMETHEUS_MULTIPROC_DIR"):
        from mcp_oauth.observability.metrics_gunicorn import prepare_multiprocess_dir

        prepare_multiprocess_dir(env["PROMETHEUS_MULTIPROC_DIR"])
    manage = [sys.executable, str(ROOT / "manage.py")]
    if env.get(MIGRATE_SWITCH, "1") != "0":
        migrate(env)
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "check_fleet_config"], cwd=ROOT, env=env, check=True)
    if env.get(DEMO_SWITCH) == "1":
        subprocess.run([*manage, "ensure_demo_user", "--superuser"], cwd=ROOT, env=env, check=True)


def database_assignment(url: str) -> str:
    """``DATABASE_URL=…`` for a command the operator copies from the banner (without it,
    ``manage.py`` would use the embedded SQLite database). A URL with a password is not printed."""
    return _assignment("DATABASE_URL", url)


def _assignment(name: str, url: str) -> str:
    if urlsplit(url).password:
        return f"{name}=<the {name} of make serve>"
    return f"{name}={shlex.quote(url)}"


def manage_py_environment(env: dict[str, str]) -> str:
    """The variables a ``manage.py`` command copied from the banner needs to run as the site does:
    the database, the Redis cache (without ``REDIS_URL``, ``manage.py`` gets a cache of its own
    and its system checks warn ``mcp_oauth.W071``) and the base URL (without ``MCP_BASE_URL``, an
    organization saved from ``manage.py shell`` moves its endpoint to ``http://127.0.0.1:8000``).
    URLs with a password are not printed."""
    parts = [database_assignment(env["DATABASE_URL"])]
    if env.get("REDIS_URL"):
        parts.append(_assignment("REDIS_URL", env["REDIS_URL"]))
    if env.get("MCP_BASE_URL"):
        parts.append(_assignment("MCP_BASE_URL", env["MCP_BASE_URL"]))
    return " ".join(parts)


def banner(env: dict[str, str]) -> str:
    """What is served where, and how to get an administrator."""
    beat = " (no beat: SERVE_BEAT=0)" if env.get(BEAT_SWITCH, "1") == "0" else " + beat"
    if env.get(DEMO_SWITCH) == "1":
        admin = f"admin: {env['MCP_BASE_URL']}/admin/ as {env.get('DEMO_USERNAME', 'demo')} (the demo password)"
    else:
        admin = (
            f"admin: {env['MCP_BASE_URL']}/admin/; create an administrator in this database with\n"
            f"    {manage_py_environment(env)} {sys.executable} manage.py createsuperuser   "
            "(or DJANGO_SUPERUSER_USERNAME, DJANGO_SUPERUSER_EMAIL, DJANGO_SUPERUSER_PASSWORD with createsuperuser --noinput)"
        )
    workers = env.get("WORKERS", "2")
    return (
        f"\n  MCP server: {env['MCP_BASE_URL']}/mcp   ({workers} ASGI worker{'' if workers == '1' else 's'}, "
        f"pool {env.get('DB_POOL_MAX_SIZE', '8')} each; Celery worker{beat} on {env['CELERY_BROKER_URL']})\n"
        f"  {admin}\n"
    )


def stop_timeouts(env: dict[str, str]) -> tuple[float, float, float]:
    """``(drain, graceful, kill)`` seconds of a stop: how long the workers keep accepting
    (``SERVE_DRAIN_SECONDS``, default :data:`DEFAULT_DRAIN_SECONDS`), gunicorn's
    ``--graceful-timeout`` (the drain plus :data:`IN_FLIGHT_SECONDS`), and how long serve waits for
    its processes before SIGKILL (the graceful timeout plus 5 s).
    :raises ValueError: ``SERVE_DRAIN_SECONDS`` is not a number of seconds of at least 0."""
    raw = env.get(DRAIN_SETTING, "")
    try:
        drain = float(raw) if raw.strip() else DEFAULT_DRAIN_SECONDS
    except ValueError:
        drain = -1.0
    if not drain >= 0 or drain == float("inf"):
        raise ValueError(f"{DRAIN_SETTING} must be a number of seconds of at least 0, not {raw!r}")
    graceful = drain + IN_FLIGHT_SECONDS
    return drain, graceful, graceful + 5


def commands(env: dict[str, str]) -> list[tuple[str, list[str], dict[str, str]]]:
    python = sys.executable
    bin_dir = Path(python).parent
    workers = env.get("WORKERS", "2")
    drain, graceful, _ = stop_timeouts(env)
    # the workers' drain delay (mcp_oauth.mcp_server.transport.drain), unless set for them
    web_env = {**env, "MCP_DRAIN_DELAY_SECONDS": env.get("MCP_DRAIN_DELAY_SECONDS") or f"{drain:g}"}
    celery_env = {**env, "DB_POOL_MAX_SIZE": env.get("DB_POOL_MAX_SIZE_CELERY", "2")}
    specs = [
        (
            "web",
            [
                str(bin_dir / "gunicorn"),
                "project.asgi:application",
                "-c",  # server hooks: listen once a worker serves; a dead worker's live metrics dropped
                "python:project.gunicorn_config",
                "-k",  # uvicorn's worker; refusals past MCP_MAX_IN_FLIGHT answered by its HTTP protocol
                env.get("WORKER_CLASS") or "mcp_oauth.mcp_server.transport.uvicorn_shed.UvicornWorker",
                "-w",
                workers,
                "-b",
                _netloc(env["HOST"], env["PORT"]),
                "--backlog",
                "4096",
                "--keep-alive",
                "75",
                "--graceful-timeout",
                f"{graceful:g}",
                "--log-level",
                "warning",
            ],
            web_env,
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
                env.get("SERVE_BEAT_SCHEDULE_FILE") or str(LOCAL / "celerybeat-schedule"),
            ],
            celery_env,
        ),
    ]
    if env.get(BEAT_SWITCH, "1") == "0":
        specs = [spec for spec in specs if spec[0] != "celery-beat"]
    return specs


def forward_restarts(web: subprocess.Popen | Callable[[], subprocess.Popen | None]) -> None:
    """SIGHUP to this supervisor -> SIGHUP to gunicorn's master ``web``: a rolling restart
    (gunicorn's "reload the configuration, start new workers, gracefully shut down old ones").
    ``web``: the process, or a callable answering the current one (the supervisor restarts it)."""
    current = web if callable(web) else lambda: web

    def restart(*_: object) -> None:
        process = current()
        if process is None or process.poll() is not None:
            print("rolling restart: gunicorn's master is not running (being restarted)", flush=True)
            return
        print(f"rolling restart: SIGHUP -> gunicorn master (pid {process.pid})", flush=True)
        process.send_signal(signal.SIGHUP)

    signal.signal(signal.SIGHUP, restart)
    first = current()
    pid = first.pid if first is not None else "?"
    print(f"  Rolling restart: kill -HUP {os.getpid()}   (forwarded to gunicorn's master, pid {pid})\n")


#: Restart backoff of a supervised process: first delay, factor, cap (seconds), and how long a run
#: must last for the next exit to start from the first delay again.
BACKOFF_FIRST, BACKOFF_FACTOR, BACKOFF_MAX, STABLE_RUN = 0.5, 2.0, 30.0, 30.0


class Supervised:
    """One child process of :class:`Supervisor`, with its restart state."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.name, self.argv, self.env = name, argv, env
        self.process: subprocess.Popen | None = None
        self.started_at = 0.0
        self.restarts = 0
        self.backoff = 0.0  # the delay used for the last restart (0: none yet)
        self.restart_at: float | None = None

    def start(self, now: float | None = None) -> None:
        self.process = subprocess.Popen(self.argv, cwd=ROOT, env=self.env)
        self.started_at = time.monotonic() if now is None else now
        self.restart_at = None

    def next_backoff(self, now: float) -> float:
        """The delay before the next start: doubled after a short run, the first after a stable one."""
        if not self.backoff or now - self.started_at >= STABLE_RUN:
            self.backoff = BACKOFF_FIRST
        else:
            self.backoff = min(BACKOFF_MAX, self.backoff * BACKOFF_FACTOR)
        return self.backoff


class Supervisor:
    """Starts the processes of :func:`commands`, restarts one that exits (see the module docstring),
    stops them all on :meth:`stop`. ``log``: where the restart lines go (stderr)."""

    def __init__(self, specs: list[tuple[str, list[str], dict[str, str]]], log: Any = None) -> None:
        self.children = {name: Supervised(name, argv, env) for name, argv, env in specs}
        self.log = log if log is not None else sys.stderr
        self.stopping = False

    def process(self, name: str) -> subprocess.Popen | None:
        return self.children[name].process

    def start(self) -> None:
        for child in self.children.values():
            child.start()

    def poll(self, now: float | None = None) -> None:
        """One round: note the exits, start again those whose backoff has passed."""
        now = time.monotonic() if now is None else now
        for child in self.children.values():
            if self.stopping:
                return
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.start(now)
                continue
            process = child.process
            if process is None or process.poll() is None:
                continue
            child.restarts += 1
            delay = child.next_backoff(now)
            child.restart_at = now + delay
            record = {
                "event": "serve.restart",
                "process": child.name,
                "pid": process.pid,
                "exit_status": process.returncode,
                "ran_seconds": round(now - child.started_at, 1),
                "restarts": child.restarts,
                "backoff_seconds": delay,
            }
            print(json.dumps(record), file=self.log, flush=True)

    def run(self, interval: float = 0.2) -> None:
        """:meth:`poll` every ``interval`` seconds until :meth:`stop` is called."""
        while not self.stopping:
            self.poll()
            time.sleep(interval)

    def stop(self, *_: object) -> None:
        self.stopping = True

    def terminate(self, grace: float = 15) -> None:
        """SIGTERM to every running process; those still running after ``grace`` s are killed."""
        running = [c.process for c in self.children.values() if c.process is not None and c.process.poll() is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def _prepared_environment() -> tuple[dict[str, str] | None, int]:
    """The environment with its secrets, after :func:`prepare`; ``(None, status)`` when serve must
    not start: 2 (where TLS terminates is not said), 3 (a prepare step failed: the fleet check
    refused this host's secrets, a migration failed)."""
    env = environment()
    problem = transport_problem(env)
    if problem:
        print(problem, file=sys.stderr)
        return None, 2
    try:
        stop_timeouts(env)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return None, 2
    before = env
    env = with_secrets(env)
    print("\n".join(["  Secrets:", *(f"    {line}" for line in secret_sources(before))]), flush=True)
    try:
        prepare(env)
    except subprocess.CalledProcessError as failed:
        step = " ".join(Path(str(part)).name for part in failed.cmd[1:3])
        print(f"prepare failed ({step}, exit status {failed.returncode}): not starting.", file=sys.stderr)
        return None, 3
    return env, 0


def main(argv: list[str] | None = None) -> int:
    """``python -m project.serve``: prepare, then serve until SIGTERM/Ctrl-C.
    ``python -m project.serve prepare``: the prepare step alone (a deployment's release step).
    ``python -m project.serve migrate``: create the database when missing and migrate under the
    fleet's lock, with the environment as it is (``make migrate``)."""
    command = (argv if argv is not None else sys.argv[1:])[:1]
    if command == ["migrate"]:
        migrate(dict(os.environ))
        return 0
    env, status = _prepared_environment()
    if env is None or command == ["prepare"]:
        return status
    *_, kill_after = stop_timeouts(env)
    supervisor = Supervisor(commands(env))
    signal.signal(signal.SIGINT, supervisor.stop)
    signal.signal(signal.SIGTERM, supervisor.stop)
    supervisor.start()
    print(banner(env), flush=True)
    forward_restarts(lambda: supervisor.process("web"))
    try:
        supervisor.run()
    finally:
        supervisor.terminate(kill_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
