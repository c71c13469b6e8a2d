"""Helpers of the production-topology tests: separate ASGI worker processes of the reference
project on the test's PostgreSQL database and a shared Redis cache (DB 6 by default)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/6")


def require_postgres_and_redis() -> None:
    """Skip unless the test database is PostgreSQL and Redis answers at :data:`REDIS_URL`."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (DATABASE_URL=postgres://…)")
    require_redis()


def require_redis() -> None:
    """Skip unless Redis answers at :data:`REDIS_URL`."""
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:  # noqa: BLE001 - any connection problem means: no Redis here
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")


def database_url() -> str:
    """The test database as a ``DATABASE_URL`` for a server process of its own (SQLite: the file)."""
    settings = connection.settings_dict
    if settings["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings['NAME']}"
    user = settings.get("USER") or "postgres"
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    password = f":{settings['PASSWORD']}" if settings.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{host}:{port}/{settings['NAME']}"


def redis_cache_settings(prefix: str) -> dict:
    """CACHES for the test process: the same Redis and key prefix as the workers."""
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": prefix,
        }
    }


def start_uvicorn(port: int, env: dict[str, str]) -> subprocess.Popen:
    """The reference site under uvicorn on ``127.0.0.1:port`` as its own process (environment
    ``env``), once it answers; its output is piped. :raises RuntimeError: it exited or did not
    answer within 30 s (the process is killed)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "project.asgi:application"]
        + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    wait_until_serving(process, port)
    return process


def wait_until_serving(process: subprocess.Popen, port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("worker exited: " + (process.stdout.read() or b"").decode(errors="replace"))
        try:
            httpx2.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp", timeout=1)
            return
        except httpx2.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("worker did not start")


@contextlib.contextmanager
def asgi_worker(port: int, base_url: str, cache_prefix: str, **env: str) -> Iterator[subprocess.Popen]:
    """One uvicorn process of ``project.asgi`` on ``port`` (DEBUG off), stopped when the block ends."""
    environment = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "REDIS_URL": REDIS_URL,
        "CACHE_KEY_PREFIX": cache_prefix,
        "MCP_BASE_URL": base_url,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "topology-test-" + "x" * 40,
        "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    environment.pop("CELERY_BROKER_URL", None)
    process = start_uvicorn(port, environment)
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
