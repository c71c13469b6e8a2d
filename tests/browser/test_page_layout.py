"""In Chromium: the site's own pages as a user sees them. The connected-apps page stacks two cards
(the applications, then "Your data"); they used to touch, border on border, as if one broken box."""

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
