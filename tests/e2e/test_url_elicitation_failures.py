"""End to end: a third-party connection that fails is told to the user and to the client at once (issue #28).

The consumer is this site (the in-process live server, its ``demo_profile`` tool calls
``require_connection(ctx, "demo", ["profile"])``); the third party is a real OAuth provider on
loopback (:class:`LoopbackProvider`, a threaded HTTP server) that misbehaves in one way per test:

* ``invalid_grant``: its token endpoint refuses the code (HTTP 400, RFC 6749 §5.2);
* ``http_500``: its token endpoint answers HTTP 500 with an HTML page;
* ``access_denied``: its authorization endpoint redirects back with ``error=access_denied``
  (RFC 6749 §4.1.2.1, the user said no there).

Before: the failed exchange left the elicitation ``pending`` (the callback page answered 502 and
nothing else happened), so a 2025-11-25 client never got ``notifications/elicitation/complete``
and a 2026-07-28 retry was held ``URL_RETRY_WAIT_SECONDS`` (120 s) and then asked again; after
``access_denied`` a 2025-11-25 retry got a new link instead of the reason. Now the failure is a
terminal state with its code; the client is the official Python SDK, in both eras.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.contrib.auth import get_user_model
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp_types import ElicitRequestURLParams, ElicitResult

from elicitation.models import Elicitation, ThirdPartyConnection, ThirdPartyProvider
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.e2e.test_python_sdk import Live
from tests.e2e.test_url_elicitation import (  # noqa: F401 - consumer_port is a fixture
    MCP_EMAIL,
    MCP_PASSWORD,
    MCP_USER,
    Browser,
    SdkRun,
    consumer_port,
    sdk_client,
)
from tests.support.live import free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: What the provider's token endpoint says beside its error code: never shown, never stored.
PROVIDER_FREE_TEXT = "internal-detail-7f3a9c (do not show)"

EXPECTED = {
    "invalid_grant": (
        "failed",
        "provider: invalid_grant",
        502,
        "Loopback Provider refused the sign-in code when this site exchanged it (invalid_grant)",
    ),
    "http_500": ("failed", "provider: server_error", 502, "Loopback Provider had an internal error (server_error)"),
    "access_denied": ("declined", "provider: access_denied", 200, "access was refused at Loopback Provider"),
}


@dataclass
class LoopbackProvider:
    """An OAuth authorization server on ``http://localhost:<port>`` whose ``mode`` picks its failure."""

    port: int
    mode: str = "invalid_grant"
    requests: list[dict] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://localhost:{self.port}"


def _handler(provider: LoopbackProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # the authorization endpoint: no login, straight back
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            provider.requests.append({"method": "GET", "path": parts.path, "query": query})
            if parts.path != "/authorize":
                self._send(404, b"not found", "text/plain")
                return
            back = {"state": query.get("state", "")}
            if provider.mode == "access_denied":
                back.update(error="access_denied", error_description=PROVIDER_FREE_TEXT)
            else:
                back["code"] = "loopback-code-0123456789"
            self._send(302, b"", "text/plain", {"Location": f"{query['redirect_uri']}?{urlencode(back)}"})

        def do_POST(self) -> None:  # the token endpoint: fails as told
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            provider.requests.append({"method": "POST", "path": self.path, "body": body})
            if provider.mode == "http_500":
                self._send(500, b"<html><body>Internal Server Error</body></html>", "text/html")
            else:
                payload = {"error": "invalid_grant", "error_description": PROVIDER_FREE_TEXT}
                self._send(400, json.dumps(payload).encode(), "application/json")

    return Handler


@contextmanager
def loopback_provider() -> Iterator[LoopbackProvider]:
    provider = LoopbackProvider(free_port())
    server = ThreadingHTTPServer(("127.0.0.1", provider.port), _handler(provider))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield provider
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def failing(settings, consumer_port):
    """``(sites, provider)``: the consumer on ``consumer_port`` whose ``demo`` provider is the loopback one."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{consumer_port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    ensure_default_resource()
    get_user_model().objects.create_user(MCP_USER, MCP_EMAIL, MCP_PASSWORD)
    with loopback_provider() as provider:
        row = ThirdPartyProvider(
            slug="demo",
            name="Loopback Provider",
            authorization_endpoint=provider.base + "/authorize",
            token_endpoint=provider.base + "/token",
            client_id="consumer-at-loopback",
            scopes="profile",
        )
        row.client_secret = "consumer-secret-at-loopback-0123456789"
        row.full_clean()
        row.save()
        from project.asgi import application

        with run_asgi_server(application, consumer_port) as base:
            yield SimpleNamespace(consumer=Live(base=base, port=consumer_port)), provider


async def through_the_provider(browser: Browser, link: str) -> Any:
    """The user's browser: the link's interstitial, Continue, the provider, back to the callback page."""
    interstitial = await browser.open(link)
    assert interstitial.status_code == 200, interstitial.text[:300]
    to_provider = await browser.submit(interstitial, {"action": "continue"})
    assert to_provider.status_code == 303, to_provider.text[:300]
    return await browser.follow(to_provider)


def assert_page(page: Any, mode: str) -> None:
    _, _, status, reason = EXPECTED[mode]
    assert page.status_code == status, page.text[:500]
    assert "/elicitation/callback/demo/" in str(page.url)
    assert 'id="outcome" data-ok="false"' in page.text
    assert reason in page.text and "Your MCP client has been told" in page.text
    assert PROVIDER_FREE_TEXT not in page.text and "loopback-code" not in page.text


def assert_row(elicitation_id: str, mode: str) -> Elicitation:
    status, error, _, _ = EXPECTED[mode]
    row = Elicitation.objects.get(elicitation_id=elicitation_id)
    assert (row.status, row.error) == (status, error)
    assert row.completed_at is not None and not ThirdPartyConnection.objects.exists()
    return row


@pytest.mark.parametrize("mode", ["invalid_grant", "http_500", "access_denied"])
def test_2025_client_is_notified_at_once_and_the_retry_ends_with_the_reason(failing, mode):
    sites, provider = failing
    provider.mode = mode
    run = SdkRun()

    async def no_elicitation(ctx, params):  # demo_profile never sends elicitation/create
        run.asked.append(params)
        return ElicitResult(action="decline")

    async def scenario() -> dict[str, Any]:
        async with sdk_client(sites, run, no_elicitation) as (client, login_browser, _):
            with pytest.raises(MCPError) as raised:
                await client.call_tool("demo_profile", {})
            (link,) = UrlElicitationRequiredError.from_error(raised.value.error).elicitations
            page = await through_the_provider(Browser(login_browser.http), link.url)
            started = time.monotonic()
            await run.wait_completion(timeout=10)  # before: never came for a failed exchange
            notified_after = time.monotonic() - started
            started = time.monotonic()
            retried = await client.call_tool("demo_profile", {})
            retry_seconds = time.monotonic() - started
            with pytest.raises(MCPError) as again:  # the reason is told once; the next call asks again
                await client.call_tool("demo_profile", {})
            return {
                "link": link,
                "page": page,
                "notified_after": notified_after,
                "retried": retried,
                "retry_seconds": retry_seconds,
                "again": again.value,
            }

    seen = asyncio.run(scenario())
    link = seen["link"]
    assert_page(seen["page"], mode)
    assert run.completed == [link.elicitation_id] and seen["notified_after"] < 5
    row = assert_row(link.elicitation_id, mode)
    assert row.notified_at is not None and row.reported_at is not None
    retried = seen["retried"]
    assert retried.is_error is True and seen["retry_seconds"] < 5
    text = retried.content[0].text
    if mode == "access_denied":
        assert text == f"Your Loopback Provider account was not connected: {EXPECTED[mode][3]} (access_denied)."
    else:
        assert text == f"Connecting your Loopback Provider account failed: {EXPECTED[mode][3]}."
    assert PROVIDER_FREE_TEXT not in text
    assert seen["again"].error.code == -32042
    (fresh,) = UrlElicitationRequiredError.from_error(seen["again"].error).elicitations
    assert fresh.elicitation_id != link.elicitation_id
    assert run.asked == []
    token_posts = [r for r in provider.requests if r["method"] == "POST"]
    assert len(token_posts) == (0 if mode == "access_denied" else 1)


@pytest.mark.parametrize("mode", ["invalid_grant", "http_500", "access_denied"])
def test_2026_retry_with_the_request_state_ends_at_once_with_the_reason(failing, settings, mode):
    sites, provider = failing
    provider.mode = mode
    settings.ELICITATION = {**settings.ELICITATION, "URL_RETRY_WAIT_SECONDS": 120}
    run = SdkRun()
    holder: dict[str, Any] = {}
    flows: list[asyncio.Task] = []

    async def answer(ctx, params):
        run.asked.append(params)
        # the user agrees to open the link; the browser flow runs while the client's retry waits
        flows.append(asyncio.create_task(through_the_provider(holder["browser"], params.url)))
        return ElicitResult(action="accept")

    async def scenario() -> dict[str, Any]:
        async with sdk_client(sites, run, answer, mode="auto") as (client, login_browser, _):
            holder["browser"] = Browser(login_browser.http)
            started = time.monotonic()
            result = await client.call_tool("demo_profile", {})
            seconds = time.monotonic() - started
            return {"result": result, "seconds": seconds, "page": await flows[0]}

    seen = asyncio.run(scenario())
    # asked once (no new link asked again silently), answered within seconds (not held 120 s)
    assert len(run.asked) == 1 and isinstance(run.asked[0], ElicitRequestURLParams)
    assert seen["seconds"] < 15, seen["seconds"]
    result = seen["result"]
    assert result.is_error is True, result
    text = result.content[0].text
    if mode == "access_denied":
        assert text == f"Your Loopback Provider account was not connected: {EXPECTED[mode][3]} (access_denied)."
    else:
        assert text == f"Connecting your Loopback Provider account failed: {EXPECTED[mode][3]}."
    assert_page(seen["page"], mode)
    row = Elicitation.objects.get(mode=Elicitation.Mode.URL)
    assert row.session_id is None and run.asked[0].url == row.url
    assert_row(row.elicitation_id, mode)
