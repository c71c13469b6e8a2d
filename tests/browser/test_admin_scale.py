"""In Chromium: the admin's client list with more rows than it counts (issue #28): the capped count
says "More than 10000", pages and the search by client ID work, the filters narrow."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

from mcp_oauth.admin.large_lists import COUNT_CAP
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-browser"


def test_admin_client_list_past_the_count_cap_in_chromium(live, chromium_executable, request):
    Application = get_application_model()
    rows = COUNT_CAP + 50
    Application.objects.bulk_create(
        Application(
            client_id=f"flood-{index:06d}",
            name=f"Flood client {index}",
            client_type="public",
            authorization_grant_type="authorization-code",
            redirect_uris=f"http://127.0.0.1:{1024 + index % 60000}/cb",
            registration_source="dcr",
        )
        for index in range(rows)
    )
    Application.objects.create(
        name="Hand-made", client_type="confidential", authorization_grant_type="client-credentials"
    )
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    changelist = live.base + "/admin/oauth2_provider/application/"

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(changelist)
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await page.goto(changelist)
            await shot(page, "admin-clients-capped")
            first = {
                "paginator": await page.inner_text("p.paginator"),
                "rows": await page.locator("#result_list tbody tr").count(),
            }
            await page.goto(changelist + "?p=2")
            second_rows = await page.locator("#result_list tbody tr").count()
            await page.goto(changelist)
            await page.fill("#searchbar", "flood-000007")
            async with page.expect_navigation():
                await page.press("#searchbar", "Enter")
            searched = await page.inner_text("#result_list")
            search_count = await page.inner_text("p.paginator")
            await page.goto(changelist + "?registration_source__exact=manual")
            manual = await page.inner_text("#result_list")
            return first, second_rows, searched, search_count, manual

    first, second_rows, searched, search_count, manual = asyncio.run(scenario())
    assert f"More than {COUNT_CAP} applications: narrow the list with a filter or a search." in first["paginator"]
    assert first["rows"] == 100 and second_rows == 100
    assert "Flood client 7" in searched and "1 application" in search_count
    assert "Hand-made" in manual and "Flood client" not in manual
