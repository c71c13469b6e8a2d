"""In Chromium: the admin's MCP dashboard, fed by real traffic on the live ASGI server.

The official MCP Python SDK calls tools through /mcp (the audit trail writes the rows), a
client-credentials client gets a token and asks for a foreign resource (audit events: a grant and a
refusal); then an administrator opens the admin index, follows "MCP dashboard" and reads the
charts: one column per minute of the last hour, the top tools with their counts, the grants by
type. The calls chart's screenshot is not blank (its pixels vary), the numbers are there with
JavaScript off, and a signed-in user who is not staff gets the admin's login page.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
from pathlib import Path

import httpx2
import pytest
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_application_model

from mcp_oauth.models import AuditEvent, ProtectedResource, ToolCallRecord
from mcp_oauth.observability.audit_trail import writer
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-dashboard"
VARIANCE_JS = """async (b64) => {
  const img = new Image(); img.src = 'data:image/png;base64,' + b64; await img.decode();
  const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0, s = 0, s2 = 0;
  for (let i = 0; i < d.length; i += 4) { const v = (d[i] + d[i + 1] + d[i + 2]) / 3; n++; s += v; s2 += v * v; }
  const m = s / n; return {variance: s2 / n - m * m, width: c.width, height: c.height};
}"""


def _mint(live_base: str, mint_token):
    user = get_user_model().objects.create_user("caller", "caller@example.com", "caller-password")
    app = get_application_model().objects.create(
        name="Dashboard SDK client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1:9/callback",
    )
    resource = ProtectedResource.objects.get(is_default=True)
    return app, mint_token(user, app, resource=resource.uri)


async def _traffic(mcp_url: str, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http)) as client:
            for _ in range(5):
                assert not (await client.call_tool("whoami", {})).is_error
            for _ in range(3):
                assert not (await client.call_tool("echo", {"text": "hi"})).is_error
            # times=99 breaks the input schema: a tool error (isError), counted among the errors
            assert (await client.call_tool("echo", {"text": "hi", "times": 99})).is_error


def test_the_dashboard_in_chromium_shows_real_traffic(live, mint_token, service, chromium_executable, request):
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    get_user_model().objects.create_user("plain", "plain@example.com", "plain-password")
    app, token = _mint(live.base, mint_token)
    asyncio.run(_traffic(live.mcp_url, token))
    # A grant and a refusal, through the token endpoint.
    svc, secret = service
    with httpx2.Client(timeout=30) as http:
        ok = http.post(
            live.base + "/oauth/token",
            data={"grant_type": "client_credentials", "scope": "mcp", "resource": live.mcp_url},
            auth=(svc.client_id, secret),
        )
        assert ok.status_code == 200, ok.text
        refused = http.post(
            live.base + "/oauth/token",
            data={"grant_type": "client_credentials", "scope": "mcp", "resource": "https://elsewhere.example/mcp"},
            auth=(svc.client_id, secret),
        )
        assert refused.status_code == 400
    assert writer.flush()
    calls = ToolCallRecord.objects.filter(client_id=app.client_id)
    assert calls.count() == 9
    assert calls.filter(outcome="tool_error").count() == 1
    refusals = AuditEvent.objects.filter(kind=AuditEvent.Kind.INVALID_RESOURCE).count()

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            async with page.expect_navigation():
                await page.click("text=MCP dashboard")
            await shot(page, "admin-dashboard")
            seen = {
                "title": await page.title(),
                "columns": await page.locator("#chart-calls g.column").count(),
                "error_bars": await page.locator("#chart-calls rect.bar-error").count(),
                "total": await page.inner_text("#mcp-calls-total"),
                "errors": await page.inner_text("#mcp-calls-errors"),
                "tools": [
                    [await cell.inner_text() for cell in await tr.locator("td").all()]
                    for tr in await page.locator("#table-tools tbody tr").all()
                ],
                "tool_bars": await page.locator("#chart-tools rect.hbar").count(),
                "clients": [
                    [await cell.inner_text() for cell in await tr.locator("td").all()]
                    for tr in await page.locator("#table-clients tbody tr").all()
                ],
                "client_bar_labels": await page.locator("#chart-clients text").all_text_contents(),
                "grants": [
                    [await cell.inner_text() for cell in await tr.locator("td").all()]
                    for tr in await page.locator("#table-grants tbody tr").all()
                ],
                "refusal_rows": await page.locator("#table-refusals tbody tr").count(),
                "elicitation": await page.locator("#mcp-panel-elicitation").count(),
            }
            png = await page.locator("#chart-calls").screenshot()
            pixels = await page.evaluate(VARIANCE_JS, base64.b64encode(png).decode())
            await page.goto(live.base + "/admin/mcp_oauth/toolcalldashboard/?range=24h")
            seen["columns_24h"] = await page.locator("#chart-calls g.column").count()
            seen["average_24h"] = await page.inner_text("#mcp-calls-average")
            seen["total_24h"] = int(await page.inner_text("#mcp-calls-total"))

            # The tool-call list: search the client, select the rows, export them as CSV.
            await page.goto(live.base + "/admin/mcp_oauth/toolcallrecord/")
            await page.fill("#searchbar", app.client_id)
            async with page.expect_navigation():
                await page.press("#searchbar", "Enter")
            await page.check("#action-toggle")
            await page.select_option("select[name=action]", "export_csv")
            async with page.expect_download() as download_info:
                await page.click("button[name=index]")
            download = await download_info.value
            seen["export_name"] = download.suggested_filename
            seen["export"] = Path(await download.path()).read_text(encoding="utf-8")

            # JavaScript off: the numbers are in the page.
            context = await chromium.browser.new_context(java_script_enabled=False)
            chromium.contexts.append(context)
            no_js = await context.new_page()
            await no_js.goto(live.base + "/admin/")
            await log_in(no_js, ADMIN, ADMIN_PASSWORD)
            await no_js.goto(live.base + "/admin/mcp_oauth/toolcalldashboard/")
            seen["no_js_total"] = await no_js.inner_text("#mcp-calls-total")

            # Not staff: the admin's login page.
            other = await chromium.new_page()
            await other.goto(live.base + "/admin/login/")
            await log_in(other, "plain", "plain-password")
            await other.goto(live.base + "/admin/mcp_oauth/toolcalldashboard/")
            seen["plain_url"] = other.url
            seen["plain_login_form"] = await other.locator("#login-form").count()
            return seen, pixels

    seen, pixels = asyncio.run(scenario())
    assert seen["title"].startswith("MCP dashboard")
    assert seen["columns"] == 60  # one per minute of the last hour
    assert seen["columns_24h"] == 24
    # 9 calls / 24 hours = 0.38 alone; the audit writer of an earlier live-server test may add rows
    average = round(seen["total_24h"] / 24, 2)
    assert seen["average_24h"] == f"({average} per hour on average; one column per hour)"
    assert seen["total_24h"] >= 9
    assert seen["error_bars"] == 1
    assert (seen["total"], seen["errors"]) == ("9", "1")
    assert seen["tools"] == [["whoami", "5"], ["echo", "4"]]
    assert seen["tool_bars"] == 2
    # the client by the name the operator knows, its ID under it
    assert seen["clients"] == [[f"Dashboard SDK client\n{app.client_id}", "9"]]
    assert seen["client_bar_labels"] == ["Dashboard SDK client", "9"]
    assert seen["grants"] == [["client_credentials", "1"]]
    assert seen["refusal_rows"] == (1 if refusals else 0)
    assert seen["elicitation"] == 1
    assert seen["no_js_total"] == "9"
    assert seen["export_name"].startswith("tool-calls-") and seen["export_name"].endswith(".csv")
    rows = list(csv.DictReader(io.StringIO(seen["export"])))
    assert len(rows) == 9 and {row["client_id"] for row in rows} == {app.client_id}
    assert sorted(row["tool"] for row in rows) == ["echo"] * 4 + ["whoami"] * 5
    assert [row["outcome"] for row in rows].count("tool_error") == 1
    assert "/admin/login/" in seen["plain_url"] and seen["plain_login_form"] == 1
    assert pixels["width"] > 300 and pixels["height"] > 80
    assert pixels["variance"] > 50, pixels  # bars and text on the background, not a blank area
