"""In Chromium: URL-mode elicitation (SEP-1036) end to end, the secure input page, the connections page.

The consumer is the in-process live server, the third-party provider the second instance of
``tests/e2e/test_url_elicitation.py`` (its fixtures are reused). The MCP client is the official
Python SDK; its OAuth is done in Chromium (:class:`tests.support.browser.ChromiumUser`), so the same
browser session then opens the elicitation links as the user would.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError, UrlElicitationRequiredError
from mcp_types import ElicitRequestURLParams, ElicitResult

from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection
from elicitation.url_mode import create_url_elicitation
from mcp_oauth.models import AuditEvent
from tests.e2e.test_python_sdk import MemoryStorage, client_metadata, live, make_provider  # noqa: F401 - live is a fixture
from tests.e2e.test_url_elicitation import (  # noqa: F401 - fixtures
    API_KEY,
    CAROL,
    CAROL_EMAIL,
    CAROL_PASSWORD,
    MCP_PASSWORD,
    MCP_USER,
    SdkRun,
    consumer_port,
    provider_site,
    sites,
)
from tests.support.browser import (
    ChromiumUser,
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    same_origin_posts,
    shot,
)
from tests.support.elicitation_helpers import PASSWORD as CONFTEST_PASSWORD
from tests.support.elicitation_helpers import open_session

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@asynccontextmanager
async def chromium_sdk_client(sites, loopback, page, run: SdkRun, elicitation_callback):
    """The SDK client (legacy handshake, URL + form elicitation) whose OAuth the user does in ``page``."""
    run._completion = asyncio.Event()
    user = ChromiumUser(page, MCP_USER, MCP_PASSWORD, loopback)
    metadata = client_metadata(
        sites.consumer.port, client_name="Chromium elicitation client", redirect_uri=loopback.redirect_uri
    )
    provider = make_provider(sites.consumer, MemoryStorage(), user, metadata=metadata)
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(
            streamable_http_client(sites.consumer.mcp_url, http_client=http),
            mode="legacy",
            elicitation_callback=elicitation_callback,
            message_handler=run.on_message,
        ) as client:
            yield client


def assert_real_origins(chromium, *bases: str) -> None:
    for base in bases:
        posts = same_origin_posts(chromium, base)
        assert posts, f"no POST to {base}"
        for post in posts:
            assert post["origin"] == base and post["status"] < 400, post


def test_connect_a_third_party_account_in_chromium_then_disconnect(sites, loopback, chromium_executable, request):
    """-32042 link -> interstitial -> the provider's login and consent -> callback page -> the client
    receives notifications/elicitation/complete -> the retry succeeds; then Disconnect on the connections page."""
    run = SdkRun()
    consumer, provider = sites.consumer, sites.provider

    async def no_elicitation(ctx, params):
        run.asked.append(params)
        return ElicitResult(action="decline")

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            async with chromium_sdk_client(sites, loopback, page, run, no_elicitation) as client:
                with pytest.raises(MCPError) as raised:
                    await client.call_tool("demo_profile", {})
                (link,) = UrlElicitationRequiredError.from_error(raised.value.error).elicitations

                # The user opens the link in the browser that signed in for the MCP client.
                await page.goto(link.url)
                await shot(page, "elicitation-interstitial")
                interstitial = {
                    "title": await page.inner_text("#interstitial-title"),
                    "host": await page.inner_text("#provider-host"),
                    "continue_class": await page.get_attribute("#continue", "class"),
                }
                async with page.expect_navigation():
                    await page.click("#continue")
                provider_login = page.url
                await log_in(page, CAROL, CAROL_PASSWORD, "provider-login")
                await page.wait_for_selector("#authorizationForm")
                await shot(page, "provider-consent")
                async with page.expect_navigation():
                    await page.click("#authorize")
                await page.wait_for_selector("#outcome")
                await shot(page, "elicitation-connected")
                done = {
                    "url": page.url,
                    "ok": await page.get_attribute("#outcome", "data-ok"),
                    "text": await page.inner_text("#outcome"),
                }

                await run.wait_completion()
                retried = await client.call_tool("demo_profile", {})

            # The connections page: connected, then Disconnect, with a confirmation.
            await page.goto(consumer.base + "/elicitation/connections/")
            await shot(page, "connections-connected")
            before = await page.inner_text('form[data-provider="demo"]')
            async with page.expect_navigation():
                await page.click('form[data-provider="demo"] button[value="disconnect"]')
            await shot(page, "connections-disconnected")
            after = {
                "messages": await page.inner_text("#messages"),
                "form": await page.inner_text('form[data-provider="demo"]'),
            }
            return chromium, link, interstitial, provider_login, done, retried, before, after

    chromium, link, interstitial, provider_login, done, retried, before, after = asyncio.run(scenario())

    assert isinstance(link, ElicitRequestURLParams) and link.url.startswith(consumer.base + "/elicitation/")
    assert interstitial["title"].startswith("Connect ") and interstitial["host"] == urlsplit(provider.base).netloc
    assert interstitial["continue_class"] == "primary"
    assert provider_login.startswith(provider.base + "/accounts/login/")
    assert done["url"].startswith(consumer.base + "/elicitation/callback/demo/") and done["ok"] == "true"
    assert "Connected" in done["text"] and CAROL_EMAIL in done["text"] and "go back to your MCP client" in done["text"]
    assert run.completed == [link.elicitation_id] and run.asked == []
    assert not retried.is_error, retried
    assert CAROL_EMAIL in retried.content[0].text or CAROL in retried.content[0].text
    assert Elicitation.objects.get(elicitation_id=link.elicitation_id).status == Elicitation.Status.COMPLETED
    # Every form POST (consumer: login, continue, disconnect; provider: login, consent) had a real Origin.
    assert_real_origins(chromium, consumer.base, provider.base)
    assert "Connected as" in before and CAROL_EMAIL in before
    assert "Disconnected" in after["messages"] and "Not connected." in after["form"]
    assert not ThirdPartyConnection.objects.filter(user__username=MCP_USER).exists()
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.CONNECTION_REVOKED, user__username=MCP_USER).count() == 1


def test_secure_input_page_in_chromium_then_delete_the_stored_value(sites, loopback, chromium_executable, request):
    """set_api_key: the link opens the secure input page (labelled with the secret and the tool), Save
    stores it, the client hears completion; then the connections page deletes the stored value."""
    run = SdkRun()
    consumer = sites.consumer
    seen: dict = {}
    tasks: list[asyncio.Task] = []

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()

            async def type_the_key(url: str) -> None:
                await page.goto(url)
                await shot(page, "secure-input")
                seen["label"] = await page.inner_text("#value-label")
                seen["save_class"] = await page.get_attribute("#save", "class")
                await page.fill("#value", API_KEY)
                async with page.expect_navigation():
                    await page.click("#save")
                await shot(page, "secure-input-saved")
                seen["done"] = await page.inner_text("#outcome")

            async def accept_and_open(ctx, params):
                run.asked.append(params)
                tasks.append(asyncio.create_task(type_the_key(params.url)))
                return ElicitResult(action="accept")

            async with chromium_sdk_client(sites, loopback, page, run, accept_and_open) as client:
                result = await asyncio.wait_for(client.call_tool("set_api_key", {}), 30)
                await asyncio.gather(*tasks)
                await run.wait_completion()

            await page.goto(consumer.base + "/elicitation/connections/")
            seen["stored"] = await page.inner_text('form[data-name="demo_api_key"]')
            async with page.expect_navigation():
                await page.click('form[data-name="demo_api_key"] button[value="forget"]')
            await shot(page, "connections-value-deleted")
            seen["messages"] = await page.inner_text("#messages")
            seen["left"] = await page.locator('form[data-name="demo_api_key"]').count()
            return chromium, result

    chromium, result = asyncio.run(scenario())

    (params,) = run.asked
    assert seen["label"] == "demo_api_key for the set_api_key tool" and seen["save_class"] == "primary"
    assert "Saved" in seen["done"] and "go back to your MCP client" in seen["done"]
    assert not result.is_error and "stored" in result.content[0].text
    assert run.completed == [params.elicitation_id]
    assert "demo_api_key" in seen["stored"]
    assert seen["messages"] == "Deleted the stored value demo_api_key." and seen["left"] == 0
    assert not StoredSecret.objects.filter(user__username=MCP_USER).exists()
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.SECRET_DELETED, user__username=MCP_USER).count() == 1
    assert_real_origins(chromium, consumer.base)


def test_another_signed_in_user_is_refused_in_chromium(
    live, user, other_user, public_app, resource, chromium_executable, request
):
    """Bob, signed in, opens alice's link: 403 "Wrong account", audited, nothing changes. Alice sees the
    request waiting on her connections page; once she has saved the value it is no longer listed."""
    session = open_session(user, public_app, resource)
    row = create_url_elicitation(
        user=user,
        session=session,
        message="Enter your key",
        kind="secret",
        secret_name="demo_api_key",
        tool_name="set_api_key",
    )
    link = f"{live.base}/elicitation/{row.elicitation_id}/"

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            bob = await chromium.new_page()
            await bob.goto(link)
            await log_in(bob, other_user.username, CONFTEST_PASSWORD)
            await shot(bob, "wrong-account")
            refused = {"url": bob.url, "text": await bob.inner_text("body"), "forms": await bob.locator("form").count()}
            status = (await bob.goto(link)).status

            alice = await chromium.new_page()
            await alice.goto(live.base + "/elicitation/connections/")
            await log_in(alice, user.username, CONFTEST_PASSWORD)
            waiting_before = await alice.locator("#waiting a").count()
            await alice.click("#waiting a")
            await alice.fill("#value", "alice-key")
            async with alice.expect_navigation():
                await alice.click("#save")
            await alice.goto(live.base + "/elicitation/connections/")
            await shot(alice, "connections-after-save")
            waiting_after = await alice.locator("#waiting").count()
            return chromium, refused, status, waiting_before, waiting_after

    chromium, refused, status, waiting_before, waiting_after = asyncio.run(scenario())
    assert status == 403 and refused["url"] == link
    assert "Wrong account" in refused["text"] and f"You are signed in as {other_user.username}." in refused["text"]
    assert refused["forms"] == 0
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_MISMATCH, user=other_user).count() == 2
    assert waiting_before == 1 and waiting_after == 0
    row.refresh_from_db()
    assert row.status == Elicitation.Status.COMPLETED
    assert StoredSecret.objects.get(user=user, name="demo_api_key").value == "alice-key"
    assert not StoredSecret.objects.filter(user=other_user).exists()
