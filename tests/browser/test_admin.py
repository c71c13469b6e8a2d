"""In Chromium: the Django admin of the live ASGI server, styled (WhiteNoise serves its CSS).

An administrator logs in, adds a trust rule, runs "refresh now" on a CIMD cache entry (the document
server is the local HTTPS server of ``tests/support/https_server.py``) and opens the audit log; every
stylesheet the pages link answers 200 ``text/css``.
"""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model

from mcp_oauth.models import AuditEvent, ClientMetadataDocument, TrustRule
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, same_origin_posts, shot  # noqa: F401
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-browser"


def test_admin_in_chromium_trust_rule_cimd_refresh_audit_log_and_css(live, cimd_env, chromium_executable, request):
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    client_id = cimd_env.publish("/admin-refresh.json", client_name="Refreshed client")
    entry = ClientMetadataDocument.objects.create(client_id=client_id)
    AuditEvent.objects.create(kind=AuditEvent.Kind.CONSENT_GRANTED, client_id="https://audited.example/c.json")
    css: list[tuple[str, int, str]] = []

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()

            async def on_response(response):
                if response.request.resource_type == "stylesheet":
                    css.append((response.url, response.status, (await response.all_headers()).get("content-type", "")))

            page.on("response", on_response)
            await page.goto(live.base + "/admin/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await shot(page, "admin-index")
            header_color = await page.eval_on_selector("#header", "e => getComputedStyle(e).backgroundColor")

            # A trust rule: deny a host.
            await page.goto(live.base + "/admin/mcp_oauth/trustrule/add/")
            await page.select_option("#id_target", "client_id_host")
            await page.fill("#id_pattern", "*.blocked.example")
            await page.select_option("#id_action", "deny")
            await page.fill("#id_note", "added in Chromium")
            async with page.expect_navigation():
                await page.click('input[name="_save"]')
            await shot(page, "admin-trust-rules")
            rule_message = await page.inner_text(".messagelist")

            # "Refresh now" on the CIMD cache entry.
            await page.goto(live.base + "/admin/mcp_oauth/clientmetadatadocument/")
            await page.check(f'input[name="_selected_action"][value="{entry.pk}"]')
            await page.select_option('select[name="action"]', "refresh_now")
            async with page.expect_navigation():
                await page.click('button[name="index"]')
            await shot(page, "admin-cimd-refreshed")
            refresh_message = await page.inner_text(".messagelist")

            # The audit log.
            await page.goto(live.base + "/admin/mcp_oauth/auditevent/")
            await shot(page, "admin-audit-log")
            audit_text = await page.inner_text("#result_list")
            return chromium, header_color, rule_message, refresh_message, audit_text

    chromium, header_color, rule_message, refresh_message, audit_text = asyncio.run(scenario())

    # Styled: the admin's stylesheets load (WhiteNoise, from the ASGI app) and apply.
    assert any(url.endswith("/static/admin/css/base.css") for url, _, _ in css), css
    for url, status, content_type in css:
        assert url.startswith(live.base + "/static/") and status == 200 and content_type.startswith("text/css"), (
            url,
            status,
            content_type,
        )
    assert header_color not in ("rgba(0, 0, 0, 0)", "transparent")

    assert "was added successfully" in rule_message
    rule = TrustRule.objects.get(pattern="*.blocked.example")
    assert (rule.target, rule.action, rule.note, rule.created_by.username) == (
        "client_id_host",
        "deny",
        "added in Chromium",
        ADMIN,
    )

    assert "Refresh started for 1 document." in refresh_message
    entry.refresh_from_db()
    assert entry.document is not None and entry.document["client_name"] == "Refreshed client"
    assert len(cimd_env.server.fetches("/admin-refresh.json")) == 1

    assert "https://audited.example/c.json" in audit_text and "consent granted" in audit_text
    # The admin login, the rule and the action: all POSTs with the real Origin, none refused.
    posts = same_origin_posts(chromium, live.base)
    assert len(posts) == 3 and all(p["origin"] == live.base and p["status"] == 302 for p in posts), posts
    assert cimd_env.guard.refused == []
