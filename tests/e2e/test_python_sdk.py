"""End to end: the official MCP Python SDK client (mcp 2.3.0) against the live ASGI server.

401 -> PRM -> AS metadata -> DCR (or a client pre-registered in the admin) ->
authorize with PKCE and resource (headless login + consent) -> token ->
initialize -> tools/list -> tools/call whoami; in mode="legacy" and mode="auto";
then a refresh after the access token expired.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import HeadlessBrowser, MemoryStorage, forms_of, free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

USERNAME, PASSWORD = "demo", "demo-password-e2e"
REDIRECT_URI = "http://127.0.0.1:{port}/callback"


@dataclass
class Live:
    base: str
    port: int
    exchanges: list = field(default_factory=list)

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"


@pytest.fixture
def live(settings):
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    ensure_default_resource()
    get_user_model().objects.create_user(USERNAME, "demo@example.com", PASSWORD)
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield Live(base=base, port=port)


def client_metadata(
    port: int, client_name: str = "e2e Python SDK client", redirect_uri: str | None = None
) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name=client_name,
        redirect_uris=[redirect_uri or REDIRECT_URI.format(port=free_port())],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )


def make_provider(
    live: Live,
    storage: MemoryStorage,
    browser: HeadlessBrowser,
    metadata: OAuthClientMetadata | None = None,
    client_metadata_url: str | None = None,
) -> OAuthClientProvider:
    """An SDK OAuth provider whose user agent is ``browser`` (login + consent, headless)."""
    pending: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        pending["url"] = url

    async def callback_handler() -> AuthorizationCodeResult:
        params = await browser.authorize(pending.pop("url"))
        assert "code" in params, params
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    return OAuthClientProvider(
        server_url=live.mcp_url,
        client_metadata=metadata or client_metadata(live.port),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
        client_metadata_url=client_metadata_url,
    )


async def session_run(live: Live, provider: OAuthClientProvider, mode: str, calls: int = 1) -> dict:
    """Connect, list tools and call ``whoami`` ``calls`` times; return what was seen."""

    async def record(response: httpx2.Response) -> None:
        live.exchanges.append((response.request.method, response.request.url.path, response.status_code))

    async with httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [record]}) as http:
        async with Client(streamable_http_client(live.mcp_url, http_client=http), mode=mode) as client:
            tools = await client.list_tools()
            results = [await client.call_tool("whoami", {}) for _ in range(calls)]
            echo = await client.call_tool("echo", {"text": "héllo"})
    return {"tools": tools, "whoami": results, "echo": echo}


def structured(result) -> dict:
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def assert_whoami(result, client_id: str) -> None:
    assert not result.is_error, result
    data = structured(result)
    assert data["user"] == USERNAME
    assert data["client_id"] == client_id
    # The SDK adds offline_access because the AS metadata lists it (MCP 2026-07-28 "Refresh tokens")
    assert data["scopes"] == ["mcp", "offline_access"]


def run(coro):
    return asyncio.run(coro)


async def with_browser(browser: HeadlessBrowser, coro):
    """Await ``coro`` and close the browser in the same event loop."""
    try:
        return await coro
    finally:
        await browser.aclose()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_dcr_flow_end_to_end(live, mode):
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    seen = run(with_browser(browser, session_run(live, make_provider(live, storage, browser), mode)))

    names = {tool.name for tool in seen["tools"].tools}
    assert {"whoami", "echo"} <= names
    client_id = storage.client_info.client_id
    assert_whoami(seen["whoami"][0], client_id)
    assert "héllo" in seen["echo"].content[0].text

    # The discovery sequence the SDK walked, in order.
    paths = [(method, path, status) for method, path, status in live.exchanges]
    first_401 = paths.index(("POST", "/mcp", 401))
    expected = [
        ("GET", "/.well-known/oauth-protected-resource/mcp", 200),
        ("GET", "/.well-known/oauth-authorization-server", 200),
        ("POST", "/oauth/register", 201),
        ("POST", "/oauth/token", 200),
    ]
    positions = [paths.index(step) for step in expected]
    assert first_401 < positions[0] and positions == sorted(positions)
    assert ("POST", "/mcp", 200) in paths[positions[-1] :]

    # The browser went through the site's own login, then the consent page.
    assert any("/accounts/login/" in url for url in browser.visited)
    assert browser.consent_pages and "e2e Python SDK client" in browser.consent_pages[0]

    application = get_application_model().objects.get(client_id=client_id)
    assert application.registration_source == "dcr" and application.client_type == "public"
    token = get_access_token_model().objects.get(application=application, user__username=USERNAME)
    assert token.resource == [live.mcp_url]
    assert storage.tokens.refresh_token


def test_preregistered_admin_client_end_to_end(live):
    # A superuser registers the client through the Django admin.
    get_user_model().objects.create_superuser("admin", "admin@example.com", "admin-password-e2e")
    redirect_uri = "http://127.0.0.1/callback"

    async def register_in_admin() -> str:
        async with httpx2.AsyncClient(base_url=live.base, timeout=30) as admin:
            page = await admin.get("/admin/login/?next=/admin/")
            form = forms_of(page.text)[0]
            login = await admin.post(
                "/admin/login/?next=/admin/",
                data={**form["fields"], "username": "admin", "password": "admin-password-e2e"},
            )
            assert login.status_code == 302, login.text[:300]
            add_url = "/admin/oauth2_provider/application/add/"
            page = await admin.get(add_url)
            assert page.status_code == 200
            form = next(f for f in forms_of(page.text) if "client_id" in f["fields"])
            fields = {**form["fields"]}
            fields.update(
                {
                    "name": "Admin-registered client",
                    "client_type": "public",
                    "authorization_grant_type": "authorization-code",
                    "redirect_uris": redirect_uri,
                    "algorithm": "",
                }
            )
            fields.pop("_addanother", None)
            fields.pop("_continue", None)
            saved = await admin.post(add_url, data=fields)
            assert saved.status_code == 302, saved.text[:2000]
            return fields["client_id"]

    client_id = run(register_in_admin())
    assert get_application_model().objects.get(client_id=client_id).registration_source == "manual"

    storage = MemoryStorage(
        client_info=OAuthClientInformationFull(
            client_id=client_id,
            redirect_uris=[REDIRECT_URI.format(port=free_port())],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        )
    )
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    seen = run(with_browser(browser, session_run(live, make_provider(live, storage, browser), "legacy")))
    assert_whoami(seen["whoami"][0], client_id)
    assert ("POST", "/oauth/register", 201) not in live.exchanges
    assert "registered by this site" in browser.consent_pages[0]


def test_refresh_after_access_token_expiry(live, settings):
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "ACCESS_TOKEN_EXPIRE_SECONDS": 2,
        "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
    }
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    provider = make_provider(live, storage, browser)
    tokens = {}

    async def two_sessions():
        first = await session_run(live, provider, "legacy")
        tokens["access"], tokens["refresh"] = storage.tokens.access_token, storage.tokens.refresh_token
        await asyncio.sleep(2.5)  # the access token (2 s) expires; the SDK refreshes before the next request
        live.exchanges.clear()
        return first, await session_run(live, provider, "legacy")

    first, second = run(with_browser(browser, two_sessions()))
    first_access, first_refresh = tokens["access"], tokens["refresh"]
    client_id = storage.client_info.client_id
    assert_whoami(first["whoami"][0], client_id)
    assert_whoami(second["whoami"][0], client_id)
    # The SDK refreshed (no second consent), and the refresh rotated both tokens.
    assert len(browser.consent_pages) == 1
    assert ("POST", "/oauth/token", 200) in live.exchanges
    assert storage.tokens.access_token != first_access
    assert storage.tokens.refresh_token != first_refresh
    newest = get_access_token_model().objects.order_by("-id").first()
    assert newest.resource == [live.mcp_url]

    # A refresh with `resource` omitted keeps the original binding.
    async def raw_refresh():
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.post(
                live.base + "/oauth/token",
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": storage.tokens.refresh_token,
                    "client_id": client_id,
                },
            )

    response = run(raw_refresh())
    assert response.status_code == 200, response.text
    assert get_access_token_model().objects.order_by("-id").first().resource == [live.mcp_url]


async def gather_session(live: Live, provider: OAuthClientProvider, calls: int) -> list:
    """One SDK session whose ``calls`` whoami calls are in flight at once."""
    async with httpx2.AsyncClient(
        auth=provider, timeout=30, event_hooks={"response": [lambda response: _record_exchange(live, response)]}
    ) as http:
        async with Client(streamable_http_client(live.mcp_url, http_client=http), mode="legacy") as client:
            return list(await asyncio.gather(*(client.call_tool("whoami", {}) for _ in range(calls))))


async def _record_exchange(live: Live, response) -> None:
    live.exchanges.append((response.request.method, response.request.url.path, response.status_code))


def test_concurrent_refreshes_of_one_client_keep_working(live, settings):
    """Issue 11: several processes of one desktop client hold the same tokens; the access token expires and
    they all refresh at once (each with concurrent calls). Every one keeps working, nobody is logged out."""
    from mcp_oauth.models import AuditEvent, RefreshGeneration

    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "ACCESS_TOKEN_EXPIRE_SECONDS": 2,
        "ALWAYS_RELOAD_OAUTHLIB_CORE": True,
    }
    processes, calls = 4, 3
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    provider = make_provider(live, storage, browser)

    async def scenario():
        await session_run(live, provider, "legacy")
        # the "processes" start with the stored tokens and know when the access token expires
        copies = [
            MemoryStorage(tokens=storage.tokens.model_copy(), client_info=storage.client_info) for _ in range(processes)
        ]
        providers = [make_provider(live, copy, browser) for copy in copies]
        for each in providers:  # what a process restores from its cache: tokens, expiry, discovered metadata
            await each._initialize()
            each.context.update_token_expiry(each.context.current_tokens)
            each.context.oauth_metadata = provider.context.oauth_metadata
            each.context.protected_resource_metadata = provider.context.protected_resource_metadata
            each.context.auth_server_url = provider.context.auth_server_url
        await asyncio.sleep(2.5)  # the access token (2 s) expires
        live.exchanges.clear()
        results = await asyncio.gather(*(gather_session(live, p, calls) for p in providers))
        return results, copies

    results, copies = run(with_browser(browser, scenario()))
    client_id = storage.client_info.client_id
    for process in results:
        assert len(process) == calls
        for result in process:
            assert_whoami(result, client_id)
    refreshes = [status for method, path, status in live.exchanges if path == "/oauth/token"]
    assert refreshes and set(refreshes) == {200}, live.exchanges
    assert not [e for e in live.exchanges if e[2] >= 500]
    assert len(browser.consent_pages) == 1  # nobody had to log in again
    # one new generation for the refresh token every process presented; a distinct pair for each
    root = RefreshGeneration.objects.get(parent__isnull=True)
    assert RefreshGeneration.objects.filter(parent=root).count() == 1
    assert len({copy.tokens.refresh_token for copy in copies}) == processes
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
