"""What the in-process benchmarks share: a Django set up on a scratch database, sample timing,
and a bearer token for the default resource.

``setup_django()`` must run before any Django import of the benchmark (it sets the reference
site's settings from the environment, with a fresh SQLite file unless ``DATABASE_URL`` names
another database, then migrates).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup_django(*, test_environment: bool = True) -> None:
    """Django with ``project.settings`` on a scratch database (SQLite in a temporary folder unless
    ``DATABASE_URL`` is set), ``BASE_URL`` ``http://testserver``, migrated. ``test_environment``:
    Django's test environment (the test client's host is accepted)."""
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ.setdefault("MCP_BASE_URL", "http://testserver")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
    os.environ.setdefault("MCP_LOG_LEVEL", "WARNING")

    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    if test_environment:
        setup_test_environment()
    call_command("migrate", verbosity=0, interactive=False)


def measure(call: Callable[[], Any], n: int, warmup: int = 10) -> list[float]:
    """``n`` timed calls of ``call`` after ``min(warmup, n)`` untimed ones: seconds each."""
    for _ in range(min(warmup, n)):
        call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def bench_token(username: str = "bench") -> tuple[Any, Any, Any, str]:
    """A user, a public client and a one-hour ``mcp`` access token bound to the default resource,
    stored hashed as the server stores them: ``(user, application, resource, raw token)``."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    resource = ensure_default_resource()
    user = get_user_model().objects.create_user(username, password="x")
    app = get_application_model().objects.create(
        name=username,
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=user, application=app, scope="mcp", expires=timezone.now() + timedelta(hours=1), resource=[resource.uri]
    )
    set_token_value(token, raw)
    token.save()
    return user, app, resource, raw


def run_cases(cases: dict[str, Callable[[], Any]], n: int, *, warmup: int = 10, baseline: str = "baseline") -> None:
    """Time every case (:func:`measure`) and print req/s, median, p95 and the ratio of each
    median to the ``baseline`` case's, one row per case."""
    results = {name: measure(call, n, warmup) for name, call in cases.items()}
    base = statistics.median(results[baseline])
    width = max(12, max(len(name) for name in results) + 2)
    print(f"{'case':<{width}}{'req/s':>10}{'median ms':>12}{'p95 ms':>10}{'x baseline':>12}")
    for name, samples in results.items():
        median = statistics.median(samples)
        p95 = sorted(samples)[max(0, int(len(samples) * 0.95) - 1)]
        print(
            f"{name:<{width}}{1 / statistics.mean(samples):>10.0f}{median * 1000:>12.2f}"
            f"{p95 * 1000:>10.2f}{median / base:>12.2f}"
        )


def http_scope(method: str, path: str, headers: dict[str, str], host: str = "127.0.0.1:18100") -> dict[str, Any]:
    """The ASGI HTTP scope of one request to ``path`` with ``headers`` (``Host`` added) from loopback."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()] + [(b"host", host.encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 18100),
    }


async def asgi_post(
    app: Any, path: str, headers: dict[str, str], body: bytes, host: str = "127.0.0.1:18100"
) -> tuple[int, dict[str, str], bytes]:
    """One POST through an ASGI application in process (no server): ``(status, headers with
    lower-case names, body)``. The client disconnects once the response is complete."""
    scope = http_scope("POST", path, {**headers, "content-length": str(len(body))}, host)
    sent = False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    status, out_headers, chunks = 0, {}, []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, out_headers
        if message["type"] == "http.response.start":
            status = message["status"]
            out_headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                done.set()

    await app(scope, receive, send)
    done.set()
    return status, out_headers, b"".join(chunks)
