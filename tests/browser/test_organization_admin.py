"""In Chromium: an organization admin of A in the Django admin (issue #31). They sign in, see only A's
rows in every list and pop-up (the organization autocomplete, the raw-id pop-up), get a 404 for B's
objects by URL, approve a client a member is waiting for and revoke a member's grant.

With ``BROWSER_SCREENSHOTS=docs/how-to/img`` the pages of the organization admin's guide
(docs/how-to/organization-admins.md) are saved there.
"""

from __future__ import annotations

import asyncio

import pytest

from mcp_oauth.models import Consent, OrganizationClient
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401
from tests.support.organization_admin import PASSWORD, build

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

#: The changelists A's admin opens, and the text of A's row each shows (B's counterpart must not show).
LISTS = {
    "organization": "Organization A",
    "organizationmembership": "member-a",
    "organizationclient": "client-a",
    "consent": "Client of A",
    "mcptask": "report_a",
    "auditevent": "client-a",
    "toolcallrecord": "tool_a",
    "trustrule": "*.a.example.com",
    "enterpriseidentityprovider": "IdP of A",
    "enterpriseidentity": "sub-a",
    "protectedresource": "MCP of A",
}


def _b_text(a_text: str) -> str:
    return (
        a_text.replace("Organization A", "Organization B")
        .replace("of A", "of B")
        .replace("-a", "-b")
        .replace("_a", "_b")
        .replace(".a.", ".b.")
    )


def test_an_organization_admin_sees_only_their_organization_and_acts_on_it(live, chromium_executable, request):
    world = build(ensure_default_resource())
    seen: dict = {}

    async def rows(page) -> str:
        return await page.inner_text("#result_list") if await page.locator("#result_list").count() else ""

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.set_viewport_size({"width": 1280, "height": 800})
            await page.goto(live.base + "/admin/")
            await log_in(page, "admin-a", PASSWORD)
            await shot(page, "organization-admin-index")
            seen["index"] = await page.inner_text("#content-main")
            for model, a_text in LISTS.items():
                await page.goto(f"{live.base}/admin/mcp_oauth/{model}/")
                text = await rows(page)
                seen[model] = (a_text in text, _b_text(a_text) in (await page.content()))

            # the organization autocomplete of a new trust rule offers A alone
            await page.goto(live.base + "/admin/mcp_oauth/trustrule/add/")
            await page.click("#id_organization + .select2 .select2-selection")
            await page.wait_for_selector(".select2-results__option:not(.loading-results)")
            await page.keyboard.type("Organization")
            await page.wait_for_timeout(600)
            seen["autocomplete"] = await page.eval_on_selector_all(
                ".select2-results__option", "o => o.map(e => e.textContent.trim())"
            )
            await shot(page, "organization-admin-trust-rule-autocomplete")

            # the raw-id pop-up of organizations lists A alone
            popup = await page.context.new_page()
            await popup.goto(live.base + "/admin/mcp_oauth/organization/?_to_field=id&_popup=1")
            seen["popup"] = await rows(popup)
            await popup.close()

            # B's objects by URL: 404
            for obj in (world.b.organization, world.b.consent, world.b.rule):
                meta = obj._meta
                response = await page.goto(f"{live.base}/admin/{meta.app_label}/{meta.model_name}/{obj.pk}/change/")
                seen.setdefault("b_status", []).append(response.status)

            # the policy page
            await page.goto(f"{live.base}/admin/mcp_oauth/organization/{world.a.organization.pk}/change/")
            await shot(page, "organization-admin-policy")
            seen["policy_readonly"] = await page.locator("#id_slug").count()

            # approve the client a member asked for
            await page.goto(live.base + "/admin/mcp_oauth/organizationclient/?status__exact=pending")
            await shot(page, "organization-admin-pending-clients")
            await page.check(f"input[name=_selected_action][value='{world.a.decision.pk}']")
            await page.select_option("select[name=action]", "approve")
            async with page.expect_navigation():
                await page.click("button[name=index]")
            seen["approved"] = await page.inner_text("ul.messagelist")
            await page.goto(live.base + "/admin/mcp_oauth/organizationclient/")
            await shot(page, "organization-admin-approved-client")

            # revoke a member's grant
            await page.goto(live.base + "/admin/mcp_oauth/consent/")
            await page.check(f"input[name=_selected_action][value='{world.a.consent.pk}']")
            await page.select_option("select[name=action]", "revoke_consents")
            async with page.expect_navigation():
                await page.click("button[name=index]")
            seen["revoked"] = await page.inner_text("ul.messagelist")
            await shot(page, "organization-admin-revoked-grant")

    asyncio.run(scenario())
    for model in LISTS:
        assert seen[model] == (True, False), model
    for other in ("Users", "Applications", "Client metadata documents", "DPoP bindings"):
        assert other not in seen["index"]
    assert "Organization clients" in seen["index"] and "Consents" in seen["index"]
    assert seen["autocomplete"] == ["Organization A"]
    assert "Organization A" in seen["popup"] and "Organization B" not in seen["popup"]
    assert seen["b_status"] == [404, 404, 404]
    assert seen["policy_readonly"] == 0  # the slug is the site's: shown as text, not a field
    assert "Approved 1 client." in seen["approved"]
    decision = OrganizationClient.objects.get(pk=world.a.decision.pk)
    assert (decision.status, decision.decided_by) == ("approved", world.a.admin)
    assert OrganizationClient.objects.get(pk=world.b.decision.pk).status == "pending"
    assert "Revoked 1 consent" in seen["revoked"]
    assert Consent.objects.get(pk=world.a.consent.pk).revoked_at is not None
    assert Consent.objects.get(pk=world.b.consent.pk).revoked_at is None
