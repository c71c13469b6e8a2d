"""In Chromium: an administrator adds a skill in the admin (its path, a SKILL.md typed in, a second
file added with "Add another"), saves it, and the live MCP endpoint serves it at once with the
digests of the saved bytes; a skill whose SKILL.md names another skill is refused with the reason
shown and nothing saved."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx2
import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

from mcp_oauth.models import Skill
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "skills-admin", "admin-password-skills"
SKILL_MD = "---\nname: runbook\ndescription: Runbook for on-call\n---\n\n# Runbook\n\nSee examples/page.md.\n"
PAGE_MD = "# Page the on-call\n"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_admin_adds_a_skill_and_the_endpoint_serves_it_in_chromium(live, chromium_executable, request, mint_token):
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)

    async def fill(page, path: str, skill_md: str) -> None:
        await page.goto(live.base + "/admin/mcp_oauth/skill/add/")
        await page.fill("#id_path", path)
        await page.fill("#id_files-0-path", "SKILL.md")
        await page.fill("#id_files-0-text", skill_md)
        await page.click("text=Add another Skill file")
        await page.fill("#id_files-1-path", "examples/page.md")
        await page.fill("#id_files-1-text", PAGE_MD)

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await fill(page, "ops/other", SKILL_MD)  # SKILL.md names "runbook": refused
            async with page.expect_navigation():
                await page.click('input[name="_save"]')
            await shot(page, "admin-skill-refused")
            refused = await page.inner_text("#content-main")
            await fill(page, "ops/runbook", SKILL_MD)
            await shot(page, "admin-skill-add")
            async with page.expect_navigation():
                await page.click('input[name="_save"]')
            await shot(page, "admin-skills")
            return refused, await page.inner_text(".messagelist"), await page.inner_text("#result_list")

    refused, message, listing = asyncio.run(scenario())
    assert "the skill path must end with it" in refused
    assert "was added successfully" in message
    assert "ops/runbook" in listing and "ops/other" not in listing
    skill = Skill.objects.get()
    assert skill.version == 1 and skill.front_matter == {"name": "runbook", "description": "Runbook for on-call"}

    resource = ensure_default_resource()
    Application = get_application_model()
    app = Application.objects.create(
        name="browser",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    token = mint_token(skill_admin(), app, resource=resource.uri)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "browser-test", "version": "1"},
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "skills/get",
        "params": {"uri": "skill://ops/runbook/SKILL.md", "_meta": meta},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "skills/get",
        "Content-Type": "application/json",
    }
    response = httpx2.post(live.mcp_url, content=json.dumps(body), headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    entry = response.json()["result"]["skill"]
    assert entry["resources"] == [
        {"uri": "skill://ops/runbook/SKILL.md", "digest": sha256(SKILL_MD.encode()), "size": len(SKILL_MD.encode())},
        {"uri": "skill://ops/runbook/examples/page.md", "digest": sha256(PAGE_MD.encode()), "size": len(PAGE_MD)},
    ]


def skill_admin():
    return get_user_model().objects.get(username=ADMIN)
