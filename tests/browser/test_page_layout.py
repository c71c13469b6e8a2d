"""In Chromium: the site's own pages as a user sees them. The connected-apps page stacks two cards
(the applications, then "Your data"); they used to touch, border on border, as if one broken box.
The app's login page, once signed in, used to show a second sign-in form under "you are signed in"."""

from __future__ import annotations

import asyncio

import pytest

from tests.e2e.test_python_sdk import PASSWORD, USERNAME, live  # noqa: F401
from tests.support.browser import (
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    shot,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_the_connected_apps_cards_are_apart_in_chromium(live, chromium_executable, request):
    async def measure():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/oauth/connected-apps/")
            await log_in(page, USERNAME, PASSWORD)
            await shot(page, "connected-apps-cards")
            return await page.locator(".card").evaluate_all(
                "cards => cards.map(c => { const r = c.getBoundingClientRect(); return [r.top, r.bottom]; })"
            )

    boxes = asyncio.run(measure())
    assert len(boxes) == 2, boxes
    (_, first_bottom), (second_top, _) = boxes
    assert second_top - first_bottom >= 12, boxes


def test_the_login_page_once_signed_in_has_no_form_in_chromium(live, chromium_executable, request):
    """/oauth/login for a signed-in user with no authorization request to return to (a site without
    LOGIN_REDIRECT_URL lands there after signing in): it says so, offers the connected-apps page,
    and shows no second sign-in form."""

    async def visit():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/oauth/login")
            await log_in(page, USERNAME, PASSWORD)
            await page.goto(live.base + "/oauth/login")  # signed in, nothing to return to
            await shot(page, "login-done")
            seen = {
                "url": page.url,
                "done": await page.inner_text("#login-done"),
                "forms": await page.locator("form").count(),
                "heading": await page.inner_text("h1"),
            }
            async with page.expect_navigation():
                await page.click("#login-connected-apps")
            seen["next_title"] = await page.title()
            return seen

    seen = asyncio.run(visit())
    assert seen["url"] == live.base + "/oauth/login"
    assert seen["done"] == f"You are signed in as {USERNAME}. You can close this page and go back to your MCP client."
    assert seen["forms"] == 0
    assert seen["heading"] == "Signed in to 127.0.0.1"
    assert seen["next_title"] == "Connected applications"
