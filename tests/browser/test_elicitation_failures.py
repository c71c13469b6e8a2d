"""In Chromium: the callback page of a third-party connection that failed (issue #28).

The consumer and the misbehaving loopback provider are those of
``tests/e2e/test_url_elicitation_failures.py``. The user opens the link, continues, the provider
fails (its token endpoint refuses the code or answers 500; or it redirects back with
``error=access_denied``), and the page the user lands on says so in plain words: what happened,
that nothing was stored and that the MCP client has been told. The elicitation is finished.
"""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model

from elicitation.url_mode import create_url_elicitation
from tests.e2e.test_url_elicitation import MCP_PASSWORD, MCP_USER, consumer_port  # noqa: F401 - fixture
from tests.e2e.test_url_elicitation_failures import EXPECTED, PROVIDER_FREE_TEXT, failing  # noqa: F401 - fixture
from tests.support.browser import (
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("mode", ["invalid_grant", "http_500", "access_denied"])
def test_the_callback_page_says_what_failed_in_chromium(failing, mode, chromium_executable, request):
    sites, provider = failing
    provider.mode = mode
    user = get_user_model().objects.get(username=MCP_USER)
    row = create_url_elicitation(
        user=user, session=None, message="Connect your account", kind="connect", provider="demo", tool_name="demo"
    )
    link = f"{sites.consumer.base}/elicitation/{row.elicitation_id}/"

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(link)
            await log_in(page, MCP_USER, MCP_PASSWORD)
            await page.wait_for_selector("#continue")
            async with page.expect_navigation(url="**/elicitation/callback/demo/**") as landed:
                await page.click("#continue")
            response = await landed.value
            await page.wait_for_selector("#outcome")
            await shot(page, f"connection-failed-{mode}")
            seen = {
                "status": response.status if response is not None else None,
                "url": page.url,
                "ok": await page.get_attribute("#outcome", "data-ok"),
                "title": await page.inner_text("#outcome h1"),
                "message": await page.inner_text("#outcome-message"),
                "next": await page.inner_text("#next-step"),
                "text": await page.inner_text("body"),
            }
            again = (await page.goto(link)).status  # the finished link is dead
            return seen, again

    seen, again = asyncio.run(scenario())
    status, error, http_status, reason = EXPECTED[mode]
    assert seen["status"] == http_status and seen["ok"] == "false"
    assert seen["url"].startswith(sites.consumer.base + "/elicitation/callback/demo/")
    if mode == "access_denied":
        assert seen["title"] == "Not connected"
        assert seen["message"] == (
            f"Loopback Provider did not connect your account: {reason} (access_denied). Your MCP client has been told."
        )
    else:
        assert seen["title"] == "Connection failed"
        assert seen["message"] == (
            f"Loopback Provider did not complete the sign-in: {reason}. Nothing was stored. "
            "Your MCP client has been told; to try again, ask it to run the tool again."
        )
    assert "go back to your MCP client" in seen["next"]
    assert PROVIDER_FREE_TEXT not in seen["text"] and "loopback-code" not in seen["text"]
    assert again == 404
    row.refresh_from_db()
    assert (row.status, row.error) == (status, error)
