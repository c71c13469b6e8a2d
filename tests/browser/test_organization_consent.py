"""In Chromium: the consent page's organization choice and the pending-approval page.

A user in two organizations authorizes a client on the shared endpoint and picks Globex from the
radio list: the code reaches the client's loopback listener, and the tokens it is exchanged for act
for Globex; the connected-apps page says so. Acme requires an admin's approval of new clients: the
member who picks Acme sees the page saying an admin of Acme must approve the client, the client
receives nothing, and the request is recorded. Screenshots of each page are saved in the test's tmp dir.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlencode

import httpx2
import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

from mcp_oauth.models import OrganizationClient
from tests.e2e.test_python_sdk import PASSWORD, USERNAME, live  # noqa: F401 - fixture
from tests.support.browser import (
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
)
from tests.support.oauth_helpers import authorize_params, pkce_pair
from tests.support.organization_helpers import add_member, make_organization, token_organization_id

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_organization_choice_and_pending_approval_in_chromium(live, loopback, chromium_executable, request, tmp_path):
    user = get_user_model().objects.get(username=USERNAME)
    acme = make_organization("acme", "Acme Corp", client_approval_required=True)
    globex = make_organization("globex", "Globex")
    add_member(user, acme)
    add_member(user, globex)
    Application = get_application_model()
    app = Application.objects.create(
        name="Desk Assistant",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=loopback.redirect_uri,
    )
    verifier, challenge = pkce_pair()
    first = authorize_params(app, challenge, redirect_uri=loopback.redirect_uri)
    _, challenge2 = pkce_pair()
    second = authorize_params(app, challenge2, redirect_uri=loopback.redirect_uri)
    seen: dict = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/oauth/authorize?" + urlencode(first))
            await log_in(page, USERNAME, PASSWORD)
            await page.wait_for_selector("#organization-choice")
            await page.screenshot(path=str(tmp_path / "consent-organization-choice.png"), full_page=True)
            seen["options"] = await page.locator(".organization-option").all_inner_texts()
            seen["checked"] = await page.locator('input[name="organization"]:checked').count()
            await page.check(f'input[name="organization"][value="{globex.pk}"]')
            async with page.expect_navigation():
                await page.click("#authorize")
            seen["query"] = await loopback.wait(1)
            async with httpx2.AsyncClient(timeout=10) as http:
                response = await http.post(
                    live.base + "/oauth/token",
                    data={
                        "grant_type": "authorization_code",
                        "code": seen["query"]["code"],
                        "redirect_uri": loopback.redirect_uri,
                        "client_id": app.client_id,
                        "code_verifier": verifier,
                    },
                )
                seen["token"] = response.json()
            await page.goto(live.base + "/oauth/connected-apps/")
            await page.screenshot(path=str(tmp_path / "connected-apps-organization.png"), full_page=True)
            seen["connected"] = await page.inner_text(".grant-organization")

            # Acme requires an admin's approval: the member is told so, the client gets nothing.
            await page.goto(live.base + "/oauth/authorize?" + urlencode(second))
            await page.wait_for_selector("#organization-choice")
            await page.check(f'input[name="organization"][value="{acme.pk}"]')
            async with page.expect_navigation() as navigation:
                await page.click("#authorize")
            seen["pending_status"] = (await navigation.value).status
            await page.screenshot(path=str(tmp_path / "pending-approval.png"), full_page=True)
            seen["pending_title"] = await page.inner_text("h1")
            seen["pending_message"] = await page.inner_text("#organization-client-message")
            seen["pending_url"] = page.url
            seen["hits"] = len(loopback.hits)

            # The Globex connection revoked from the connected-apps page: its form posts its organization.
            await page.goto(live.base + "/oauth/connected-apps/")
            async with page.expect_navigation():
                await page.click('.grant:has(.grant-organization[data-organization="globex"]) button[value="revoke"]')
            seen["after_revoke"] = await page.locator(".grant-organization").all_inner_texts()
            async with httpx2.AsyncClient(timeout=10) as http:
                seen["revoked_status"] = (
                    await http.post(
                        live.base + "/mcp",
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={
                            "Authorization": f"Bearer {seen['token']['access_token']}",
                            "Accept": "application/json, text/event-stream",
                            "MCP-Protocol-Version": "2025-11-25",
                        },
                    )
                ).status_code

    asyncio.run(scenario())

    assert [option.strip() for option in seen["options"]] == ["Acme Corp", "Globex"] and seen["checked"] == 0
    assert seen["query"]["state"] == first["state"]
    assert "access_token" in seen["token"], seen["token"]
    assert token_organization_id(seen["token"]["access_token"]) == globex.pk
    assert seen["connected"] == "Globex"
    assert seen["after_revoke"] == [] and seen["revoked_status"] == 401
    assert seen["pending_status"] == 403
    assert seen["pending_title"] == "An administrator of Acme Corp must approve this application"
    assert seen["pending_message"] == (
        "An administrator of Acme Corp must approve Desk Assistant before members can use it for Acme Corp."
    )
    assert seen["pending_url"].startswith(live.base + "/oauth/authorize")
    assert seen["hits"] == 1  # the client received nothing from the pending request
    row = OrganizationClient.objects.get()
    assert (row.organization_id, row.application_id, row.status, row.requested_by_id) == (
        acme.pk,
        app.pk,
        "pending",
        user.pk,
    )
    for name in ("consent-organization-choice", "connected-apps-organization", "pending-approval"):
        assert (tmp_path / f"{name}.png").stat().st_size > 5000
