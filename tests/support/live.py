"""A live ASGI server (uvicorn) on loopback and a headless browser for end-to-end tests.

The server runs the reference project in a thread of the test process, so it
shares the test database (tests using it need ``transactional_db``).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import uvicorn


@dataclass
class MemoryStorage:
    """The MCP SDK's ``TokenStorage`` protocol, in memory."""

    tokens: object = None
    client_info: object = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def run_asgi_server(app, port: int) -> Iterator[str]:
    """Serve ``app`` on ``http://127.0.0.1:<port>`` until the block ends; yields the base URL."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="off", timeout_graceful_shutdown=2
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the live ASGI server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        close_thread_connections()


def close_thread_connections() -> None:
    """Close the database connections that served the live server.

    Sync code under ASGI runs in asgiref's thread-sensitive executor; its
    connections would otherwise stay open and block dropping the test database.
    """
    import asyncio

    from asgiref.sync import sync_to_async
    from django.db import connections

    asyncio.run(sync_to_async(connections.close_all, thread_sensitive=True)())


class FormParser(HTMLParser):
    """Collects the forms of a page: ``[{"action", "method", "fields": {name: value}}]``."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.forms.append(
                {"action": attrs.get("action") or "", "method": (attrs.get("method") or "get").lower(), "fields": {}}
            )
        elif not self.forms:
            return
        elif tag == "input" and attrs.get("name"):
            kind = (attrs.get("type") or "text").lower()
            if kind in ("checkbox", "radio") and "checked" not in attrs:
                return
            if kind == "submit":
                return
            self.forms[-1]["fields"][attrs["name"]] = attrs.get("value") or ""
        elif tag == "select" and attrs.get("name"):
            self._select = attrs["name"]
            self.forms[-1]["fields"].setdefault(self._select, "")
        elif tag == "option" and self._select and "selected" in attrs:
            self.forms[-1]["fields"][self._select] = attrs.get("value") or ""
        elif tag == "textarea" and attrs.get("name"):
            self.forms[-1]["fields"][attrs["name"]] = ""

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None


def forms_of(html: str) -> list[dict]:
    parser = FormParser()
    parser.feed(html)
    return parser.forms


@dataclass
class HeadlessBrowser:
    """Plays the user's browser: logs in with the site's normal login form and approves consent.

    ``authorize(url)`` follows the authorization request to the client's loopback
    ``redirect_uri`` (where nothing listens) and returns its query parameters.
    """

    base_url: str
    username: str
    password: str
    approve: bool = True
    visited: list[str] = field(default_factory=list)
    consent_pages: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.http = httpx2.AsyncClient(base_url=self.base_url, follow_redirects=False, timeout=30)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _submit(self, page_url: str, form: dict, extra: dict | None = None) -> httpx2.Response:
        data = dict(form["fields"])
        data.update(extra or {})
        target = urljoin(page_url, form["action"] or page_url)
        return await self.http.post(target, data=data, headers={"Referer": page_url})

    async def authorize(self, url: str) -> dict[str, str]:
        response = await self.http.get(url)
        for _ in range(10):
            self.visited.append(str(response.url))
            location = response.headers.get("location")
            if response.status_code in (301, 302, 303, 307, 308) and location:
                target = urljoin(str(response.url), location)
                if not target.startswith(self.base_url):
                    return {k: v[0] for k, v in parse_qs(urlsplit(target).query).items()}
                response = await self.http.get(target)
                continue
            if response.status_code != 200:
                raise AssertionError(f"unexpected {response.status_code} at {response.url}: {response.text[:500]}")
            page_url = str(response.url)
            forms = forms_of(response.text)
            login_forms = [f for f in forms if "username" in f["fields"] and "password" in f["fields"]]
            if login_forms:  # the site's login page (/accounts/login/) or the app's own (/oauth/login)
                form = login_forms[0]
                response = await self._submit(page_url, form, {"username": self.username, "password": self.password})
            elif forms and "client_id" in forms[0]["fields"]:
                self.consent_pages.append(response.text)
                extra = {"allow": "Authorize"} if self.approve else {}
                response = await self._submit(page_url, forms[0], extra)
            else:
                raise AssertionError(f"unexpected page at {page_url}: {response.text[:500]}")
        raise AssertionError("too many redirects")
