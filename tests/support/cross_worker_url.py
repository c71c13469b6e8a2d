"""Helpers of the cross-worker URL-elicitation tests: two uvicorn worker processes of the reference
site on the test database, an MCP client of either era, and a user finishing the page over HTTP.

Workers run ``tests.support.worker_settings`` with short timeouts. On PostgreSQL with Redis reachable they
share Redis (cache and wake-ups) and their safety poll is set to 60 s, longer than the waits here:
an answer or a completion that reaches the other worker is delivered by its wake-up (a lost one
would only delay the outcome to the wait's last read). On SQLite (or without Redis) they have no
shared channel and poll the database every 0.1 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2
from django.db import connection

from tests.support.elicitation_helpers import PASSWORD
from tests.support.live import forms_of, free_port
from tests.support.topology import REDIS_URL, database_url, start_uvicorn

#: Fernet key of the workers and of the test process (the stored secret is read back).
KEY = "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8="
SECRET_KEY = "cross-worker-url-" + "k" * 40
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
URL_CAPS = {"elicitation": {"url": {}}}
STORED = "Your API key is stored, encrypted on the server. It never went through your MCP client."


def redis_available() -> bool:
    """True on PostgreSQL when Redis answers at ``TEST_REDIS_URL``: the workers then share it."""
    if connection.vendor != "postgresql":
        return False
    try:
        import redis

        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception:  # noqa: BLE001 - any connection problem means: no Redis here
        return False
    return True


@dataclass
class Workers:
    """Two running workers: ``urls["a"]``, ``urls["b"]`` (``MCP_BASE_URL`` is A's)."""

    urls: dict[str, str]
    shared: bool  # Redis cache and wake-ups

    @property
    def base(self) -> str:
        return self.urls["a"]

    def on(self, worker: str, link: str) -> str:
        """``link`` (a URL of the site) served by ``worker``."""
        parts = urlsplit(link)
        return self.urls[worker] + parts.path + (f"?{parts.query}" if parts.query else "")


@contextlib.contextmanager
def two_workers(port_a: int, *, elicitation: dict | None = None, mcp_oauth: dict | None = None) -> Iterator[Workers]:
    """Workers A (on ``port_a``) and B, both ``tests.support.worker_settings`` on the test database."""
    port_b = free_port()
    base = f"http://127.0.0.1:{port_a}"
    shared = redis_available()
    overrides = {"SSE_POLL_INTERVAL_SECONDS": 0.1, "SSE_KEEPALIVE_SECONDS": 0.5, **(mcp_oauth or {})}
    if shared:
        overrides.setdefault("WAKEUP_SAFETY_POLL_SECONDS", 60)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.support.worker_settings",
        "DATABASE_URL": database_url(),
        "DB_POOL_MAX_SIZE": "4",
        "MCP_BASE_URL": base,
        "DJANGO_DEBUG": "1",
        "DJANGO_SECRET_KEY": SECRET_KEY,
        "ELICITATION_ENCRYPTION_KEYS": KEY,
        "PYTHONUNBUFFERED": "1",
        "TEST_WORKER_MCP_OAUTH": json.dumps(overrides),
        "TEST_WORKER_ELICITATION": json.dumps({"URL_ANSWER_TIMEOUT_SECONDS": 15, **(elicitation or {})}),
    }
    for name in ("CELERY_BROKER_URL", "REDIS_URL", "MCP_WAKEUP_URL", "CACHE_KEY_PREFIX"):
        env.pop(name, None)
    if shared:
        env.update(REDIS_URL=REDIS_URL, CACHE_KEY_PREFIX="xw-" + secrets.token_hex(4))
    processes: list[subprocess.Popen] = []
    try:
        processes.append(start_uvicorn(port_a, env))
        processes.append(start_uvicorn(port_b, env))
        yield Workers({"a": base, "b": f"http://127.0.0.1:{port_b}"}, shared)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def sse_messages(lines: Iterator[str]) -> Iterator[dict]:
    """JSON-RPC messages of an SSE line iterator (``data:`` lines)."""
    for line in lines:
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:].strip())


def final_message(response: httpx2.Response, request_id: int) -> dict:
    """The JSON-RPC answer to ``request_id`` in a JSON or SSE response."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return next(m for m in sse_messages(iter(response.text.splitlines())) if m.get("id") == request_id)
    return response.json()


def without_meta(result: dict) -> dict:
    """A result without its ``_meta`` (server information)."""
    return {key: value for key, value in result.items() if key != "_meta"}


def bearer(token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }


def legacy_session(http: httpx2.Client, url: str, token: str, capabilities: dict = URL_CAPS) -> dict[str, str]:
    """Initialize a 2025-11-25 session on ``url``; the headers of its later requests."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": LEGACY,
            "capabilities": capabilities,
            "clientInfo": {"name": "cross-worker", "version": "1"},
        },
    }
    response = http.post(f"{url}/mcp", headers=bearer(token), json=init)
    assert response.status_code == 200, response.text
    headers = {**bearer(token), "Mcp-Session-Id": response.headers["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(f"{url}/mcp", headers=headers, json=initialized).status_code == 202
    return headers


def answer(request_id: str, action: str = "accept") -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"action": action}}


def modern_headers(token: str, tool: str) -> dict[str, str]:
    return {**bearer(token), "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool}


def modern_call(tool: str, request_id: int, **params) -> dict:
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": URL_CAPS}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}, "_meta": meta, **params},
    }


class PageUser:
    """The user, in a cookie jar of their own, on the site's pages (any worker: the session is in
    the database): signs in on the login page the link sends them to, then acts on the page."""

    def __init__(self, username: str, password: str = PASSWORD) -> None:
        self.username, self.password = username, password
        self.http = httpx2.Client(timeout=30, follow_redirects=False)

    def close(self) -> None:
        self.http.close()

    def open(self, link: str) -> httpx2.Response:
        """GET ``link``, signing in first when sent to the login page. :returns: the page (200)."""
        response = self.http.get(link)
        if response.status_code == 302:
            login = urljoin(link, response.headers["location"])
            page = self.http.get(login)
            (form,) = [f for f in forms_of(page.text) if "username" in f["fields"]]
            data = {**form["fields"], "username": self.username, "password": self.password}
            signed_in = self.http.post(urljoin(login, form["action"] or login), data=data)
            assert signed_in.status_code == 302, signed_in.text[:500]
            response = self.http.get(link)
        assert response.status_code == 200, (response.status_code, response.text[:500])
        return response

    def submit(self, link: str, page: httpx2.Response, **fields: str) -> httpx2.Response:
        """POST the page's form with ``fields`` (``action=save`` / ``cancel`` …) to ``link``."""
        (form,) = [f for f in forms_of(page.text) if f["method"] == "post"]
        return self.http.post(link, data={**form["fields"], **fields})

    def save_secret(self, link: str, value: str) -> httpx2.Response:
        """Open the secure input page at ``link`` and save ``value``. :returns: the page as shown."""
        page = self.open(link)
        done = self.submit(link, page, value=value, action="save")
        assert done.status_code == 200 and "Saved" in done.text, done.text[:500]
        return page
