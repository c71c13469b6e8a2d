"""In Chromium: an administrator finds the fleet's shared secrets in the admin (the settings the
hosts recorded, each ring's size, the host that recorded it), opens one (read-only, no fingerprint
shown) and deletes it, so the next host to start records its ring anew."""

from __future__ import annotations

import asyncio

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth import get_user_model

from mcp_oauth.management.fleet import check_fleet_config
from mcp_oauth.models import FleetSecret
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "fleet-admin", "admin-password-fleet"


def test_admin_lists_opens_and_deletes_a_fleet_secret_in_chromium(live, settings, chromium_executable, request):
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "REQUEST_STATE_KEYS": ["state-new-" + "n" * 32, "state-old-" + "o" * 32],
    }
    check_fleet_config(host="web-1.internal")
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    state_row = FleetSecret.objects.get(setting='MCP_OAUTH["REQUEST_STATE_KEYS"]')

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            async with page.expect_navigation():
                await page.click("text=Fleet secrets")
            await page.wait_for_selector("#result_list tbody tr")  # the list, not the index still shown
            await shot(page, "admin-fleet-secrets")
            listed = await page.eval_on_selector_all(
                "#result_list tbody tr",
                "rows => rows.map(r => Array.from(r.querySelectorAll('th, td')).map(c => c.innerText.trim()))",
            )
            async with page.expect_navigation():
                await page.click('#result_list a:text-is("MCP_OAUTH[\\"REQUEST_STATE_KEYS\\"]")')
            await shot(page, "admin-fleet-secret")
            opened = await page.content()
            has_save = await page.locator('input[name="_save"]').count()
            async with page.expect_navigation():
                await page.click("a.deletelink")
            async with page.expect_navigation():
                await page.click('input[type="submit"]')
            return listed, opened, has_save, await page.inner_text(".messagelist")

    listed, opened, has_save, message = asyncio.run(scenario())
    assert [row[1:4] for row in listed] == [
        ['ELICITATION["ENCRYPTION_KEYS"]', "1", "web-1.internal"],
        ['MCP_OAUTH["REQUEST_STATE_KEYS"]', "2", "web-1.internal"],
        ["SECRET_KEY", "1", "web-1.internal"],
    ]
    assert has_save == 0
    assert not any(fingerprint in opened for fingerprint in state_row.fingerprints) and state_row.salt not in opened
    assert "was deleted successfully" in message
    assert not FleetSecret.objects.filter(pk=state_row.pk).exists()
