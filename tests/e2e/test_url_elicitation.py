"""End to end, URL-mode elicitation (SEP-1036) between two live instances of this project.

* The **consumer** (this site): the in-process ASGI server on the test database, with the
  MCP endpoint, the ``demo_profile`` / ``set_api_key`` / ``ask_name`` tools and the
  elicitation pages. Its MCP client is the official Python SDK (``mcp`` 2.3.0) or raw HTTP.
* The **provider** (the "third party"): a second instance of the same project started as a
  subprocess with its own SQLite file, reachable as ``http://localhost:<port>``. It is a real
  OAuth authorization server (login, consent, code + PKCE, token endpoint) with a bearer-protected
  ``/api/profile``; the consumer is registered there as the confidential client
  ``e2e-provider-client`` (``ensure_oauth_client``) and points its ``demo`` provider at it
  (``ensure_demo_provider --issuer … --discover``).

The two hosts differ (``127.0.0.1`` and ``localhost``) on purpose: cookies are per host, not per
port, so two instances on one host would overwrite each other's session cookie in one browser.

One headless browser (one ``httpx2`` client, one cookie jar) plays the user: signed in on the
consumer as the MCP user, it opens the elicitation link, passes the interstitial, signs in at
the provider as ``carol``, approves, and comes back to the consumer's callback.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import pytest
from asgiref.sync import sync_to_async
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model
from django.core.management import call_command
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp_types import ElicitCompleteNotification, ElicitRequestFormParams, ElicitRequestURLParams, ElicitResult

from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.models import AuditEvent, McpSession
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.e2e.test_python_sdk import Live, MemoryStorage, make_provider
from tests.support.live import HeadlessBrowser, forms_of, free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REPO_DIR = Path(__file__).resolve().parents[2]

PROVIDER_CLIENT_ID = "e2e-provider-client"
PROVIDER_CLIENT_SECRET = "e2e-provider-client-secret-0123456789abcdef"
CAROL, CAROL_PASSWORD, CAROL_EMAIL = "carol", "carol-password-e2e", "carol@provider.test"
MCP_USER, MCP_PASSWORD, MCP_EMAIL = "dora", "dora-password-e2e", "dora@consumer.test"
PROTOCOL_VERSION = "2025-11-25"
API_KEY = "sk-demo-123456"


# --- the second instance (the third-party provider) -----------------------------------------


@dataclass
class ProviderSite:
    """The second instance: its base URL, database file, console log and request log."""

    base: str
    db_path: Path
    log_path: Path
    request_log: Path
    process: subprocess.Popen | None = None

    def query(self, sql: str, *args: Any) -> list[tuple]:
        """Read its database (read-only) while it runs."""
        with closing(sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, timeout=10)) as db:
            return db.execute(sql, args).fetchall()

    def request_count(self) -> int:
        return len(self.requests())

    def requests(self) -> list[dict]:
        """Every request it received (``tests.support.second_instance``), bodies joined in."""
        if not self.request_log.exists():
            return []
        requests: dict[int, dict] = {}
        for line in self.request_log.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            if entry["kind"] == "request":
                requests[entry["n"]] = {**entry, "body": ""}
            elif entry["n"] in requests:
                requests[entry["n"]]["body"] += entry["body"]
        return [requests[n] for n in sorted(requests)]

    def log_tail(self, lines: int = 60) -> str:
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def _run(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=REPO_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        output, _ = process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {process.returncode}):\n{output}")


@pytest.fixture(scope="module")
def consumer_port() -> int:
    """The consumer's port, chosen first: the provider must know its redirect URI."""
    return free_port()


@pytest.fixture(scope="module")
def provider_site(tmp_path_factory, consumer_port) -> ProviderSite:
    """Start the second instance (migrate, carol, the consumer's client, uvicorn); stop it after the module."""
    port = free_port()
    while port == consumer_port:
        port = free_port()
    work = tmp_path_factory.mktemp("provider-instance")
    site = ProviderSite(
        base=f"http://localhost:{port}",
        db_path=work / "provider.sqlite3",
        log_path=work / "provider.log",
        request_log=work / "requests.jsonl",
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CELERY_", "DJANGO_", "MCP_", "DATABASE_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=f"sqlite:///{site.db_path}",
        MCP_BASE_URL=site.base,
        PORT=str(port),
        DJANGO_DEBUG="1",
        ELICITATION_ENCRYPTION_KEYS=Fernet.generate_key().decode(),
        E2E_REQUEST_LOG=str(site.request_log),
        PYTHONUNBUFFERED="1",
    )
    python = sys.executable
    log = open(site.log_path, "w", encoding="utf-8")  # closed at teardown
    # The server imports Django while the database is being migrated (it needs the tables only
    # when the first request comes; readiness is checked after the setup commands).
    site.process = subprocess.Popen(
        [
            python,
            "-m",
            "uvicorn",
            "tests.support.second_instance:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=REPO_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _finish(_run([python, "manage.py", "migrate", "--noinput", "-v0"], env), "migrate")
        setup = [
            _run([python, "manage.py", "ensure_demo_user", "--username", CAROL, "--password", CAROL_PASSWORD], env),
            _run(
                [
                    python,
                    "manage.py",
                    "ensure_oauth_client",
                    "--client-id",
                    PROVIDER_CLIENT_ID,
                    "--client-secret",
                    PROVIDER_CLIENT_SECRET,
                    "--redirect-uri",
                    f"http://127.0.0.1:{consumer_port}/elicitation/callback/demo/",
                    "--name",
                    "Consumer site (e2e)",
                ],
                env,
            ),
        ]
        _finish(setup[0], "ensure_demo_user")
        _finish(setup[1], "ensure_oauth_client")
        with closing(sqlite3.connect(site.db_path, timeout=30)) as db, db:
            db.execute("UPDATE auth_user SET email = ? WHERE username = ?", (CAROL_EMAIL, CAROL))
        deadline = time.monotonic() + 30
        while True:
            if site.process.poll() is not None:
                raise RuntimeError(f"the provider instance exited ({site.process.returncode}):\n{site.log_tail()}")
            try:
                if httpx2.get(site.base + "/.well-known/oauth-authorization-server", timeout=2).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the provider instance did not answer:\n{site.log_tail()}")
            time.sleep(0.1)
        yield site
    finally:
        site.process.terminate()
        try:
            site.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            site.process.kill()
            site.process.wait()
        log.close()


# --- the consumer (this site, in process) ----------------------------------------------------


@dataclass
class Sites:
    consumer: Live
    provider: ProviderSite
    first_request: int = 0  # provider requests before this test

    def provider_requests(self) -> list[dict]:
        return self.provider.requests()[self.first_request :]


@pytest.fixture
def sites(settings, request, consumer_port, provider_site) -> Sites:
    """The consumer on ``consumer_port`` with the ``demo`` provider pointing at the second instance."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{consumer_port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    ensure_default_resource()
    get_user_model().objects.create_user(MCP_USER, MCP_EMAIL, MCP_PASSWORD)
    call_command(
        "ensure_demo_provider",
        issuer=provider_site.base,
        client_id=PROVIDER_CLIENT_ID,
        client_secret=PROVIDER_CLIENT_SECRET,
        discover=True,
        stdout=io.StringIO(),
    )
    failed_before = request.session.testsfailed
    first_request = provider_site.request_count()
    from project.asgi import application

    with run_asgi_server(application, consumer_port) as base:
        yield Sites(Live(base=base, port=consumer_port), provider_site, first_request)
    if request.session.testsfailed > failed_before:
        sys.__stderr__.write(f"\n--- provider instance log (tail) ---\n{provider_site.log_tail()}\n---\n")


# --- the user's browser ------------------------------------------------------------------------


@dataclass
class Browser:
    """One user agent (one cookie jar) across both instances; follows redirects by hand."""

    http: httpx2.AsyncClient = field(default_factory=lambda: httpx2.AsyncClient(follow_redirects=False, timeout=15))
    visited: list[str] = field(default_factory=list)

    async def follow(self, response: httpx2.Response) -> httpx2.Response:
        for _ in range(10):
            self.visited.append(str(response.url))
            location = response.headers.get("location")
            if response.status_code not in (301, 302, 303, 307, 308) or not location:
                return response
            response = await self.http.get(urljoin(str(response.url), location))
        raise AssertionError("too many redirects")

    async def open(self, url: str) -> httpx2.Response:
        return await self.follow(await self.http.get(url))

    async def submit(self, page: httpx2.Response, extra: dict[str, str], form: int = 0) -> httpx2.Response:
        """POST the page's form ``form`` with ``extra`` (buttons are not in the parsed fields); no redirect followed."""
        chosen = forms_of(page.text)[form]
        target = urljoin(str(page.url), chosen["action"] or str(page.url))
        return await self.http.post(target, data={**chosen["fields"], **extra})

    async def login(self, base: str, username: str, password: str) -> None:
        page = await self.open(base + "/accounts/login/")
        response = await self.submit(page, {"username": username, "password": password})
        assert response.status_code == 302, response.text[:300]

    def csrf_header(self, host: str = "127.0.0.1") -> dict[str, str]:
        return {"X-CSRFToken": self.http.cookies.get("csrftoken", domain=host)}


async def connect_at_provider(browser: Browser, link: str, sites: Sites) -> dict[str, Any]:
    """Open ``link`` (signed in on the consumer), continue, sign in at the provider as carol,
    approve, come back. :returns: the pages and redirects seen, for assertions."""
    consumer, provider = sites.consumer.base, sites.provider.base
    interstitial = await browser.open(link)
    assert interstitial.status_code == 200, interstitial.text[:500]
    assert 'id="interstitial-title"' in interstitial.text and urlsplit(provider).netloc in interstitial.text

    to_provider = await browser.submit(interstitial, {"action": "continue"})
    assert to_provider.status_code == 303, to_provider.text[:300]
    authorize_url = to_provider.headers["location"]
    assert authorize_url.startswith(provider + "/oauth/authorize?")

    login_page = await browser.follow(to_provider)
    assert login_page.status_code == 200 and str(login_page.url).startswith(provider + "/accounts/login/")
    after_login = await browser.submit(login_page, {"username": CAROL, "password": CAROL_PASSWORD})
    assert after_login.status_code == 302, after_login.text[:300]

    consent = await browser.follow(after_login)
    assert consent.status_code == 200 and str(consent.url).startswith(provider + "/oauth/authorize?"), consent.text[
        :300
    ]
    assert "client_id" in forms_of(consent.text)[0]["fields"]
    back = await browser.submit(consent, {"allow": "Authorize"})
    assert back.status_code == 303, back.text[:300]  # the consent POST answers 303 See Other (RFC 9700 §4.12)
    callback_url = back.headers["location"]
    assert callback_url.startswith(consumer + "/elicitation/callback/demo/?")

    done = await browser.follow(back)
    assert done.status_code == 200, done.text[:500]
    return {
        "authorize": parse_qs(urlsplit(authorize_url).query),
        "callback": parse_qs(urlsplit(callback_url).query),
        "consent": consent.text,
        "done": done.text,
    }


# --- MCP clients -------------------------------------------------------------------------------


@dataclass
class SdkRun:
    """What the SDK client's callbacks saw."""

    asked: list = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    _completion: asyncio.Event | None = None

    async def on_message(self, message) -> None:
        if isinstance(message, ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)
            if self._completion is not None:
                self._completion.set()

    async def wait_completion(self, timeout: float = 10) -> None:
        if self._completion is None:
            self._completion = asyncio.Event()
        if not self.completed:
            await asyncio.wait_for(self._completion.wait(), timeout)


@asynccontextmanager
async def sdk_client(
    sites: Sites, run: SdkRun, elicitation_callback, mode: str = "legacy", http_hooks: dict | None = None
) -> AsyncIterator[tuple[Client, HeadlessBrowser, MemoryStorage]]:
    """The SDK client (legacy handshake unless ``mode="auto"``, both callbacks), OAuth done headlessly
    by the MCP user's browser."""
    run._completion = asyncio.Event()
    storage = MemoryStorage()
    browser = HeadlessBrowser(sites.consumer.base, MCP_USER, MCP_PASSWORD)
    try:
        async with httpx2.AsyncClient(
            auth=make_provider(sites.consumer, storage, browser), timeout=30, event_hooks=http_hooks or {}
        ) as http:
            async with Client(
                streamable_http_client(sites.consumer.mcp_url, http_client=http),
                mode=mode,
                elicitation_callback=elicitation_callback,
                message_handler=run.on_message,
            ) as client:
                yield client, browser, storage
    finally:
        await browser.aclose()


def parse_sse(text: str) -> list[dict]:
    """The events of an SSE body: ``{"id"?, "data"?: parsed JSON}``, or ``{"comment"}``."""
    events, current = [], {}
    for line in text.split("\n"):
        line = line.rstrip("\r")
        if not line:
            if current:
                events.append(current)
            current = {}
        elif line.startswith(":"):
            events.append({"comment": line[1:].strip()})
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            current[name] = json.loads(value) if name == "data" else value
    if current:
        events.append(current)
    return events


async def sse_events(response: httpx2.Response) -> AsyncIterator[dict]:
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            for event in parse_sse(block + "\n\n"):
                yield event


@dataclass
class RawSession:
    """An MCP session over plain HTTP with a minted bearer token (URL and form elicitation declared)."""

    http: httpx2.AsyncClient
    url: str
    token: str
    session_id: str = ""

    def headers(self, **extra: str) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json, text/event-stream"}
        if self.session_id:
            headers.update({"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": PROTOCOL_VERSION})
        return {**headers, **extra}

    async def open(self) -> RawSession:
        response = await self.http.post(
            self.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {"elicitation": {"form": {}, "url": {}}},
                    "clientInfo": {"name": "raw e2e client", "version": "1.0"},
                },
            },
            headers=self.headers(),
        )
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == PROTOCOL_VERSION
        self.session_id = response.headers["Mcp-Session-Id"]
        response = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers()
        )
        assert response.status_code == 202, response.text
        return self

    async def call_tool(self, name: str, arguments: dict, request_id: int = 2) -> list[dict]:
        response = await self.http.post(
            self.url,
            json={
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments},
            },
            headers=self.headers(),
        )
        assert response.status_code == 200
        if response.headers["content-type"].startswith("application/json"):  # the tool sent nothing first
            return [response.json()]
        assert response.headers["content-type"].startswith("text/event-stream")
        return [event["data"] for event in parse_sse(response.text) if "data" in event]

    @asynccontextmanager
    async def stream(self, last_event_id: str | None = None) -> AsyncIterator[httpx2.Response]:
        headers = self.headers(Accept="text/event-stream")
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        async with self.http.stream("GET", self.url, headers=headers) as response:
            assert response.status_code == 200, await response.aread()
            yield response

    async def read_until(self, method: str, last_event_id: str | None = None, timeout: float = 10) -> list[dict]:
        """Open the GET stream, collect its events up to the first ``method`` one, disconnect."""
        events: list[dict] = []

        async def read() -> None:
            async with self.stream(last_event_id) as response:
                async for event in sse_events(response):
                    if "data" in event:
                        events.append(event)
                        if event["data"].get("method") == method:
                            return

        try:
            await asyncio.wait_for(read(), timeout)
        except TimeoutError:
            raise AssertionError(f"{method} did not arrive within {timeout} s; got {events}") from None
        return events


@dataclass
class Listener:
    """A session's GET stream read in the background."""

    session: RawSession
    events: list[dict] = field(default_factory=list)
    task: asyncio.Task | None = None

    async def start(self) -> Listener:
        opened = asyncio.Event()

        async def read() -> None:
            async with self.session.stream() as response:
                async for event in sse_events(response):
                    self.events.append(event)
                    if event.get("comment") == "stream open":
                        opened.set()

        self.task = asyncio.create_task(read())
        await asyncio.wait_for(opened.wait(), 5)
        return self

    def methods(self) -> list[str]:
        return [event["data"].get("method") for event in self.events if "data" in event]

    async def wait_for(self, method: str, timeout: float = 5) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while method not in self.methods():
            assert asyncio.get_running_loop().time() < deadline, f"{method} never arrived: {self.events}"
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


def is_fernet(value: str) -> bool:
    return value.startswith("gAAAA")


# --- tests -------------------------------------------------------------------------------------


def test_connect_a_third_party_account_through_url_elicitation(sites):
    """demo_profile -> -32042 -> the browser connects carol's account at the second instance ->
    notifications/elicitation/complete -> the retried call reads carol's profile there."""
    run = SdkRun()
    consumer, provider = sites.consumer, sites.provider

    async def no_elicitation(ctx, params):  # demo_profile never sends elicitation/create
        run.asked.append(params)
        return ElicitResult(action="decline")

    async def scenario() -> dict[str, Any]:
        async with sdk_client(sites, run, no_elicitation) as (client, login_browser, storage):
            with pytest.raises(MCPError) as raised:
                await client.call_tool("demo_profile", {})
            error = raised.value
            required = UrlElicitationRequiredError.from_error(error.error)
            # The user's browser is the one that signed in for the MCP client's OAuth.
            browser = Browser(login_browser.http)
            flow = await connect_at_provider(browser, required.elicitations[0].url, sites)
            await run.wait_completion()
            retried = await client.call_tool("demo_profile", {})
            return {
                "error": error,
                "required": required,
                "flow": flow,
                "retried": retried,
                "visited": browser.visited,
                "mcp_tokens": (storage.tokens.access_token, storage.tokens.refresh_token),
            }

    seen = asyncio.run(scenario())

    # -32042 with exactly one URL elicitation, a link to the consumer's own page carrying only an opaque id.
    assert seen["error"].code == -32042
    (link,) = seen["required"].elicitations
    assert isinstance(link, ElicitRequestURLParams) and link.mode == "url"
    row = Elicitation.objects.get(elicitation_id=link.elicitation_id)
    parts = urlsplit(link.url)
    assert link.url.startswith(consumer.base + "/elicitation/")
    assert parts.path == f"/elicitation/{link.elicitation_id}/" and not parts.query and not parts.fragment
    mcp_access, mcp_refresh = seen["mcp_tokens"]
    session_ids = list(McpSession.objects.filter(user__username=MCP_USER).values_list("pk", flat=True))
    assert row.session_id in session_ids
    for private in [MCP_USER, MCP_EMAIL, CAROL, mcp_access, mcp_refresh, *session_ids]:
        assert private not in link.url
    assert run.asked == []

    # The browser went consumer -> provider (login as carol, consent) -> consumer callback.
    authorize, callback = seen["flow"]["authorize"], seen["flow"]["callback"]
    assert authorize["client_id"] == [PROVIDER_CLIENT_ID]
    assert authorize["redirect_uri"] == [consumer.base + "/elicitation/callback/demo/"]
    assert authorize["code_challenge_method"] == ["S256"] and authorize["scope"] == ["profile"]
    assert authorize["resource"] == [provider.base + "/api"]
    assert callback["iss"] == [provider.base] and callback["state"] == authorize["state"]
    assert "Consumer site (e2e)" in seen["flow"]["consent"]
    assert 'id="outcome" data-ok="true"' in seen["flow"]["done"] and "Connected" in seen["flow"]["done"]
    assert CAROL_EMAIL in seen["flow"]["done"]
    hosts = [urlsplit(url).netloc for url in seen["visited"]]
    assert hosts[0] == urlsplit(consumer.base).netloc and urlsplit(provider.base).netloc in hosts
    assert hosts[-1] == urlsplit(consumer.base).netloc

    # The completion notification reached the SDK's message_handler, with exactly that id.
    assert run.completed == [link.elicitation_id]
    row.refresh_from_db()
    assert row.status == Elicitation.Status.COMPLETED and row.kind == Elicitation.Kind.CONNECT
    assert row.notified_at is not None and row.user.get_username() == MCP_USER

    # The retried call read carol's profile at the provider with the third-party token.
    retried = seen["retried"]
    assert not retried.is_error, retried
    data = retried.structured_content
    assert data["profile"]["username"] == CAROL and data["profile"]["email"] == CAROL_EMAIL
    assert data["account"] == CAROL_EMAIL and provider.base in data["provider"]

    # The consumer keeps the third-party tokens encrypted; the plaintext is a real token of the provider's.
    connection = ThirdPartyConnection.objects.get(user__username=MCP_USER, provider__slug="demo")
    access, refresh = connection.access_token, connection.refresh_token
    assert access and refresh and connection.account_label == CAROL_EMAIL
    assert is_fernet(connection.access_token_encrypted) and access not in connection.access_token_encrypted
    assert is_fernet(connection.refresh_token_encrypted) and refresh not in connection.refresh_token_encrypted
    tokens = provider.query(
        "SELECT a.client_id, u.username, t.scope, t.resource, t.token_checksum FROM oauth2_provider_accesstoken t "
        "JOIN oauth2_provider_application a ON a.id = t.application_id JOIN auth_user u ON u.id = t.user_id"
    )
    assert tokens and {client_id for client_id, *_ in tokens} == {PROVIDER_CLIENT_ID}
    mine = [t for t in tokens if t[4] == hashlib.sha256(access.encode()).hexdigest()]
    assert len(mine) == 1 and mine[0][1:4] == (CAROL, "profile", json.dumps([provider.base + "/api"]))

    # What reached the provider: the third-party token on /api/profile only, never the MCP client's tokens.
    received = sites.provider_requests()
    bearers = [(r["path"], r["authorization"]) for r in received if r["authorization"].lower().startswith("bearer ")]
    assert bearers and {path for path, _ in bearers} == {"/api/profile"}
    assert {auth for _, auth in bearers} == {f"Bearer {access}"}
    assert len(bearers) == 2  # the account label when connecting, then demo_profile
    token_posts = [r for r in received if r["path"] == "/oauth/token"]
    assert len(token_posts) == 1 and token_posts[0]["authorization"].startswith("Basic ")
    assert "grant_type=authorization_code" in token_posts[0]["body"] and "code_verifier=" in token_posts[0]["body"]
    for mcp_token in (mcp_access, mcp_refresh):
        assert not any(mcp_token in json.dumps(r) for r in received)

    # The decrypted token works at the provider; the MCP client's token does not.
    profile = httpx2.get(provider.base + "/api/profile", headers={"Authorization": f"Bearer {access}"}, timeout=10)
    assert profile.status_code == 200 and profile.json()["username"] == CAROL
    refused = httpx2.get(provider.base + "/api/profile", headers={"Authorization": f"Bearer {mcp_access}"}, timeout=10)
    assert refused.status_code == 401


def test_form_elicitation_on_the_same_kind_of_client(sites):
    """A client declaring form and URL mode still answers form elicitations; invalid content is refused."""
    run = SdkRun()
    answers = [
        ElicitResult(action="accept", content={"name": "Ada"}),
        ElicitResult(action="accept", content={"age": 7}),
    ]

    async def answer(ctx, params):
        run.asked.append(params)
        return answers.pop(0)

    async def scenario():
        async with sdk_client(sites, run, answer) as (client, _browser, _storage):
            return [await client.call_tool("ask_name", {}) for _ in range(2)]

    accepted, invalid = asyncio.run(scenario())
    assert not accepted.is_error and accepted.content[0].text == "Hello, Ada!"
    assert invalid.is_error and "name: is required" in invalid.content[0].text, invalid.content[0].text
    assert [type(p) for p in run.asked] == [ElicitRequestFormParams, ElicitRequestFormParams]
    assert [row.status for row in Elicitation.objects.order_by("created_at", "id")] == ["accepted", "invalid"]
    assert run.completed == []


def test_completion_while_disconnected_is_replayed_to_the_asking_session_only(
    sites, user, other_user, public_app, mint_token
):
    """The completion happens while the asking session has no stream open: it arrives on reconnect
    with Last-Event-ID. Another session of the same user and another user's session never get it;
    another signed-in user opening the link gets 403 and changes nothing."""
    consumer = sites.consumer
    alice_token = mint_token(user, public_app, resource=consumer.mcp_url)
    bob_token = mint_token(other_user, public_app, resource=consumer.mcp_url)
    password = "correct horse battery"

    async def scenario() -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=15) as http:
            asking = await RawSession(http, consumer.mcp_url, alice_token).open()
            same_user = await RawSession(http, consumer.mcp_url, alice_token).open()
            other = await RawSession(http, consumer.mcp_url, bob_token).open()

            # The asking session's stream delivers one event; remember its id, then disconnect.
            await sync_to_async(enqueue_session_message)(
                asking.session_id, {"method": "notifications/tools/list_changed"}
            )
            (first,) = await asking.read_until("notifications/tools/list_changed")
            last_seen = first["id"]

            # The other two sessions listen during everything that follows.
            listeners = [await Listener(same_user).start(), await Listener(other).start()]

            messages = await asking.call_tool("demo_profile", {})
            (error,) = [m["error"] for m in messages if "error" in m]
            assert error["code"] == -32042, messages
            (link,) = error["data"]["elicitations"]
            assert link["mode"] == "url" and link["url"].startswith(consumer.base + "/elicitation/")

            # Bob, signed in on the consumer, opens alice's link: 403, and continuing is refused too.
            bob = Browser(httpx2.AsyncClient(follow_redirects=False, timeout=15))
            await bob.login(consumer.base, other_user.username, password)
            bob_page = await bob.open(link["url"])
            bob_post = await bob.http.post(link["url"], data={"action": "continue"}, headers=bob.csrf_header())
            await bob.http.aclose()
            bob_state = await sync_to_async(
                lambda: (
                    Elicitation.objects.get(elicitation_id=link["elicitationId"]).status,
                    ThirdPartyConnection.objects.count(),
                    AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_MISMATCH, user=other_user).count(),
                )
            )()
            provider_requests_after_bob = len(sites.provider_requests())

            # Alice connects in her browser while the asking session has no stream open.
            alice = Browser()
            await alice.login(consumer.base, user.username, password)
            await connect_at_provider(alice, link["url"], sites)
            await alice.http.aclose()
            row = await Elicitation.objects.aget(elicitation_id=link["elicitationId"])
            assert row.status == Elicitation.Status.COMPLETED and row.notified_at is not None

            # Reconnect with Last-Event-ID: the completion is replayed, the earlier event is not.
            replayed = await asking.read_until("notifications/elicitation/complete", last_event_id=last_seen)
            arrived = asyncio.get_running_loop().time()

            # ~2 s more for a stray delivery, then prove both other streams were live all along.
            await asyncio.sleep(2)
            for listener, marker in zip(
                listeners, ["notifications/prompts/list_changed", "notifications/resources/list_changed"], strict=True
            ):
                await sync_to_async(enqueue_session_message)(listener.session.session_id, {"method": marker})
                await listener.wait_for(marker)
                await listener.stop()
            return {
                "link": link,
                "last_seen": last_seen,
                "replayed": replayed,
                "listeners": listeners,
                "bob_page": bob_page,
                "bob_post": bob_post,
                "bob_state": bob_state,
                "provider_requests_after_bob": provider_requests_after_bob,
                "quiet_for": asyncio.get_running_loop().time() - arrived,
            }

    seen = asyncio.run(scenario())
    link = seen["link"]

    # Another user: 403 on the page and on continue; nothing stored, nothing sent to the provider.
    assert seen["bob_page"].status_code == 403 and "Wrong account" in seen["bob_page"].text
    assert seen["bob_post"].status_code == 403
    assert seen["bob_state"] == (Elicitation.Status.PENDING, 0, 2)
    assert seen["provider_requests_after_bob"] == 0

    # The asking session got exactly the completion, after the last event it had seen.
    (event,) = seen["replayed"]
    assert int(event["id"]) > int(seen["last_seen"])
    assert event["data"] == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": link["elicitationId"]},
    }

    # The other session of the same user and bob's session never got it.
    assert seen["quiet_for"] >= 2
    for listener in seen["listeners"]:
        assert "notifications/elicitation/complete" not in listener.methods(), listener.events
        assert not any(link["elicitationId"] in json.dumps(e) for e in listener.events)

    # Only alice got a connection (the one made in her browser).
    assert list(ThirdPartyConnection.objects.values_list("user__username", flat=True)) == [user.username]


def test_set_api_key_through_url_elicitation_during_the_call(sites):
    """set_api_key sends elicitation/create mode=url; the user types the key on the consumer's secure page;
    the tool reports it stored; it is encrypted at rest and never went through the client."""
    run = SdkRun()
    pages: dict[str, httpx2.Response] = {}
    tasks: list[asyncio.Task] = []
    holder: dict[str, HeadlessBrowser] = {}

    async def type_the_key(url: str) -> None:
        browser = Browser(holder["browser"].http)
        page = await browser.open(url)
        pages["form"] = page
        pages["saved"] = await browser.submit(page, {"value": API_KEY, "action": "save"})

    async def accept_and_open(ctx, params):
        run.asked.append(params)
        tasks.append(asyncio.create_task(type_the_key(params.url)))  # the user opens the link; the client goes on
        return ElicitResult(action="accept")

    async def scenario():
        async with sdk_client(sites, run, accept_and_open) as (client, browser, _storage):
            holder["browser"] = browser
            result = await asyncio.wait_for(client.call_tool("set_api_key", {}), 15)
            await asyncio.gather(*tasks)
            await run.wait_completion()
            return result

    result = asyncio.run(scenario())

    (params,) = run.asked
    assert isinstance(params, ElicitRequestURLParams) and params.mode == "url"
    assert params.url == f"{sites.consumer.base}/elicitation/{params.elicitation_id}/"
    assert pages["form"].status_code == 200 and 'name="value"' in pages["form"].text
    assert pages["saved"].status_code == 200 and "Saved" in pages["saved"].text
    assert not result.is_error and "stored" in result.content[0].text
    assert API_KEY not in json.dumps(result.model_dump(mode="json"))
    assert run.completed == [params.elicitation_id]

    row = Elicitation.objects.get(elicitation_id=params.elicitation_id)
    assert row.kind == Elicitation.Kind.SECRET and row.status == Elicitation.Status.COMPLETED and row.notified_at
    secret = StoredSecret.objects.get(user__username=MCP_USER, name="demo_api_key")
    assert is_fernet(secret.value_encrypted) and API_KEY not in secret.value_encrypted
    assert secret.value == API_KEY
    assert sites.provider_requests() == []  # nothing of this went to the third party


def test_a_2026_client_in_auto_mode_answers_forms_and_connects_through_input_required(sites, settings):
    """The SDK's default mode="auto" negotiates 2026-07-28 (server/discover), lists tools, calls
    whoami, answers ask_name through input_required, and completes demo_profile: URL input
    request -> the user's browser flow (started when the client accepts) -> the retry, held open
    until the flow completed -> carol's profile. No MCP session exists at any point."""
    settings.ELICITATION = {**settings.ELICITATION, "URL_RETRY_WAIT_SECONDS": 60}
    run = SdkRun()
    flows: list[asyncio.Task] = []
    seen_requests: list[tuple[str, str, str]] = []
    holder: dict[str, Any] = {}

    async def record(request: httpx2.Request) -> None:
        if request.url.path == "/mcp":
            seen_requests.append(
                (request.method, request.headers.get("mcp-protocol-version", ""), request.headers.get("mcp-method", ""))
            )

    async def answer(ctx, params):
        run.asked.append(params)
        if isinstance(params, ElicitRequestFormParams):
            return ElicitResult(action="accept", content={"name": "Ada", "age": 36})
        # URL mode: the user agrees to open the link; the browser flow runs while the retry waits.
        flows.append(asyncio.create_task(connect_at_provider(holder["browser"], params.url, sites)))
        return ElicitResult(action="accept")

    async def scenario() -> dict[str, Any]:
        async with sdk_client(sites, run, answer, mode="auto", http_hooks={"request": [record]}) as (
            client,
            login_browser,
            _,
        ):
            holder["browser"] = Browser(login_browser.http)
            tools = await client.list_tools()
            whoami = await client.call_tool("whoami", {})
            greeted = await client.call_tool("ask_name", {})
            profile = await client.call_tool("demo_profile", {})
            flow = await flows[0]
            return {"tools": tools, "whoami": whoami, "greeted": greeted, "profile": profile, "flow": flow}

    seen = asyncio.run(scenario())
    assert {"whoami", "ask_name", "demo_profile"} <= {tool.name for tool in seen["tools"].tools}
    assert seen["whoami"].structured_content["user"] == MCP_USER
    assert not seen["greeted"].is_error and seen["greeted"].content[0].text == "Hello, Ada! You are 36."
    profile = seen["profile"]
    assert not profile.is_error, profile
    assert profile.structured_content["profile"]["username"] == CAROL
    assert profile.structured_content["account"] == CAROL_EMAIL
    assert 'id="outcome" data-ok="true"' in seen["flow"]["done"]

    # what the client was asked: one form, one URL entry without elicitationId (never -32042)
    assert [type(p) for p in run.asked] == [ElicitRequestFormParams, ElicitRequestURLParams]
    url_params = run.asked[1]
    assert url_params.elicitation_id is None
    row = Elicitation.objects.get(mode=Elicitation.Mode.URL)
    assert url_params.url == row.url and row.session_id is None and row.status == Elicitation.Status.COMPLETED
    assert row.user.get_username() == MCP_USER and row.notified_at is None
    form_row = Elicitation.objects.get(mode=Elicitation.Mode.FORM)
    assert (form_row.status, form_row.content, form_row.session_id) == ("accepted", {"name": "Ada", "age": 36}, None)

    # every MCP request spoke 2026-07-28; no initialize, no GET stream, no DELETE, no session
    mcp = [r for r in seen_requests if r[1]]  # the unauthenticated first POST carries no version yet
    assert mcp[0] == ("POST", "2026-07-28", "server/discover")
    assert {version for _, version, _ in mcp} == {"2026-07-28"}
    assert {method for method, _, _ in mcp} == {"POST"}
    assert "initialize" not in {m for _, _, m in mcp}
    assert [m for _, _, m in mcp].count("tools/call") == 5  # whoami, ask_name x2, demo_profile x2
    assert not McpSession.objects.exists()
