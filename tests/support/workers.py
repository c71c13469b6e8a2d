"""Worker processes of the reference site for the probe and shutdown tests: uvicorn (as
``make run`` serves it) or gunicorn with uvicorn workers (as ``make serve``), on the test's
database, with the environment each test chooses (dependencies pointed at closed ports)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2

from tests.support.topology import REDIS_URL, database_url, start_uvicorn, wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
FERNET = "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8="


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def worker_env(base_url: str, cache_prefix: str, **extra: str) -> dict[str, str]:
    """The environment of a production-like worker (DEBUG off, so ``SECURE_SSL_REDIRECT`` and
    ``ALLOWED_HOSTS`` are enforced) on the test database and Redis; ``extra`` wins. No
    ``CELERY_BROKER_URL`` unless given."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": REDIS_URL,
        "CACHE_KEY_PREFIX": cache_prefix,
        "MCP_BASE_URL": base_url,
        "DJANGO_DEBUG": "0",
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "DJANGO_SECRET_KEY": "shutdown-test-" + "x" * 40,
        "ELICITATION_ENCRYPTION_KEYS": FERNET,
        "MCP_LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
        "DB_POOL_MAX_SIZE": "2",
    }
    env.pop("CELERY_BROKER_URL", None)
    env.update(extra)
    return env


@contextlib.contextmanager
def uvicorn_worker(port: int, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """``uvicorn project.asgi:application`` on ``port``; stopped (SIGTERM, then SIGKILL) at the end."""
    process = start_uvicorn(port, env)
    try:
        yield process
    finally:
        stop(process)


@contextlib.contextmanager
def gunicorn_server(port: int, env: dict[str, str], workers: int = 1) -> Iterator[subprocess.Popen]:
    """gunicorn with ``workers`` uvicorn workers (the ``make serve`` command line) on ``port``."""
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "gunicorn"), "project.asgi:application"]
        + ["-k", "uvicorn_worker.UvicornWorker", "-w", str(workers), "-b", f"127.0.0.1:{port}"]
        + ["--graceful-timeout", "20", "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_until_serving(process, port)
    try:
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def exit_code(process: subprocess.Popen, timeout: float = 30) -> int:
    """The process's exit code once it exited (killed after ``timeout`` seconds: -9)."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)
        return -9


def stopped_gracefully(process: subprocess.Popen, timeout: float = 30) -> tuple[int, list[str]]:
    """``(exit code, problems)`` of a worker told to stop with SIGTERM, once it exited.

    uvicorn re-raises the signal it caught once its graceful shutdown is complete (its handler
    gone, the default one kills the process): a finished shutdown exits with ``-SIGTERM``. The
    problems are the output lines that say otherwise (tracebacks, tasks cancelled at the
    graceful timeout, errors).
    """
    code = exit_code(process, timeout)
    output = (process.stdout.read() or b"").decode(errors="replace") if process.stdout else ""
    markers = ("Traceback", "graceful shutdown exceeded", "ERROR", "Exception")
    return code, [line for line in output.splitlines() if any(marker in line for marker in markers)]


def wait_for(predicate, timeout: float = 20, step: float = 0.05) -> bool:
    """Poll ``predicate()`` until it is true (True) or ``timeout`` passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def worker_pids(master: subprocess.Popen) -> list[int]:
    """The child processes (gunicorn workers) of ``master``."""
    try:
        return [int(pid) for pid in Path(f"/proc/{master.pid}/task/{master.pid}/children").read_text().split()]
    except OSError:
        return []


def get(url: str, **headers: str) -> httpx2.Response:
    return httpx2.get(url, headers=headers, timeout=10)
