"""In Chromium: the connected-apps page. The SDK client is authorized in the browser, the user finds it
from the connections page's link, revokes it, and the client's token then gets 401 at /mcp."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from mcp_oauth.models import AuditEvent, Consent
from tests.e2e.test_python_sdk import (  # noqa: F401
    PASSWORD,
    USERNAME,
    MemoryStorage,
    client_metadata,
    live,
    make_provider,
    session_run,
)
from tests.support.browser import (
    ChromiumUser,
    chromium_executable,  # noqa: F401 - fixture
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    same_origin_posts,
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_revoke_a_connected_app_in_chromium(live, loopback, chromium_executable, request):
    storage = MemoryStorage()
    metadata = client_metadata(live.port, client_name="App to revoke", redirect_uri=loopback.redirect_uri)
    seen: dict = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            user = ChromiumUser(page, USERNAME, PASSWORD, loopback)
            await session_run(live, make_provider(live, storage, user, metadata=metadata), "legacy")
            seen["consent_footer"] = user.consent_pages[0]

            await page.goto(live.base + "/elicitation/connections/")
            async with page.expect_navigation():
                await page.click("#connected-apps-link")
            await shot(page, "connected-apps")
            seen["url"] = page.url
            seen["listed"] = await page.inner_text(".grant")
            async with page.expect_navigation():
                await page.click('.grant button[value="revoke"]')
            await shot(page, "connected-apps-revoked")
            seen["message"] = await page.inner_text("#messages")
            seen["empty"] = await page.inner_text("#no-grants")
            async with httpx2.AsyncClient(timeout=10) as http:
                response = await http.post(
                    live.mcp_url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    headers={
                        "Authorization": f"Bearer {storage.tokens.access_token}",
                        "Accept": "application/json, text/event-stream",
                    },
                )
                seen["mcp_status"] = response.status_code
            return chromium

    chromium = asyncio.run(scenario())

    assert 'id="connected-apps-link"' in seen["consent_footer"]
    assert seen["url"] == live.base + "/oauth/connected-apps/"
    assert "App to revoke" in seen["listed"] and "registered itself dynamically" in seen["listed"]
    assert "mcp" in seen["listed"] and live.mcp_url in seen["listed"]
    assert seen["message"].startswith("App to revoke can no longer use your account")
    assert seen["empty"] == "You have not authorized any application."
    assert seen["mcp_status"] == 401
    client_id = storage.client_info.client_id
    assert Consent.objects.get(application__client_id=client_id).revoked_at is not None
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED, client_id=client_id).count() == 1
    posts = same_origin_posts(chromium, live.base)
    assert len(posts) == 3 and all(p["origin"] == live.base and p["status"] in (302, 303) for p in posts), posts


def test_connected_apps_shows_when_each_connection_lapses_in_chromium(
    live, loopback, chromium_executable, request, settings
):
    """The page says until when the connection lasts: the earlier of the idle window (30 days from the
    newest refresh token) and the session cap (here 10 days from the authorization, then the default
    90), and what ends it."""
    from datetime import datetime, timedelta

    from django.utils.timezone import localtime
    from oauth2_provider.models import get_refresh_token_model

    from mcp_oauth.models import RefreshGeneration

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": 10 * 24 * 3600}
    storage = MemoryStorage()
    metadata = client_metadata(live.port, client_name="App with a session", redirect_uri=loopback.redirect_uri)
    seen: dict = {}

    async def read(page, key: str) -> None:
        lapses = page.locator(".grant .grant-lapses")
        seen[key] = {
            "text": await lapses.inner_text(),
            "at": await lapses.get_attribute("data-lapses-at"),
            "reason": await lapses.get_attribute("data-reason"),
        }

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            user = ChromiumUser(page, USERNAME, PASSWORD, loopback)
            await session_run(live, make_provider(live, storage, user, metadata=metadata), "legacy")
            await page.goto(live.base + "/oauth/connected-apps/")
            await shot(page, "connected-apps-lapses-cap")
            await read(page, "cap")
            settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": 90 * 24 * 3600}
            await page.reload()
            await shot(page, "connected-apps-lapses-idle")
            await read(page, "idle")
            return chromium

    asyncio.run(scenario())

    cap = RefreshGeneration.objects.get().session_started_at + timedelta(days=10)
    assert seen["cap"]["reason"] == "cap"
    assert abs((datetime.fromisoformat(seen["cap"]["at"]) - cap).total_seconds()) < 1
    assert seen["cap"]["text"].startswith(localtime(cap).strftime("%Y-%m-%d %H:%M"))
    assert "then it will ask for your approval again" in seen["cap"]["text"]
    idle = get_refresh_token_model().objects.get(revoked__isnull=True).created + timedelta(days=30)
    assert seen["idle"]["reason"] == "idle"
    assert abs((datetime.fromisoformat(seen["idle"]["at"]) - idle).total_seconds()) < 1
    assert seen["idle"]["text"].startswith(localtime(idle).strftime("%Y-%m-%d %H:%M"))
    assert "each use pushes this back" in seen["idle"]["text"]
