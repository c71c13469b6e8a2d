"""In Chromium, on two worker processes: the user finishes URL-mode elicitation pages on the worker
that is not running the tool, and the pages name the asking client (its OAuth client name, as the
consent page shows it, HTML-escaped), in both MCP eras.

The client is named ``<script>window.pwned = 1</script> Notes "β"``: the pages must show that
text, and no script of it may run. Workers: :mod:`tests.support.cross_worker_url`.
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from django.contrib.auth.hashers import make_password

from elicitation.models import Elicitation, StoredSecret
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.browser import (
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    same_origin_posts,
    shot,
)
from tests.support.cross_worker_url import (
    KEY,
    STORED,
    answer,
    final_message,
    legacy_session,
    modern_call,
    modern_headers,
    sse_messages,
    two_workers,
    without_meta,
)
from tests.support.elicitation_helpers import PASSWORD, demo_provider
from tests.support.live import free_port

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HOSTILE_NAME = '<script>window.pwned = 1</script> Notes "β"'


@pytest.fixture
def site(settings, user, public_app, mint_token):
    port_a = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port_a}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [KEY]}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the workers' own
    type(user).objects.filter(pk=user.pk).update(password=make_password(PASSWORD))
    public_app.name = HOSTILE_NAME
    public_app.save()
    return port_a, mint_token(user, public_app, "mcp", ensure_default_resource().uri)


async def sign_in_and_read(page, link: str, username: str, name: str) -> dict:
    """Open ``link`` (sent to the login page first), sign in, and read what the page names."""
    await page.goto(link)
    await log_in(page, username, PASSWORD)
    await shot(page, name)
    return {
        "url": page.url,
        "client": await page.inner_text("#client-name"),
        "pwned": await page.evaluate("typeof window.pwned"),
    }


def test_legacy_secure_page_finished_in_chromium_on_the_other_worker_before_the_answer(
    site, user, public_app, chromium_executable, request
):
    """2025-11-25, the order of the report: the tool waits on A; the user saves the value in
    Chromium on B; only then does the client's accept reach B. The tool reports it stored."""
    port_a, token = site

    async def scenario():
        with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
            headers = legacy_session(http, workers.urls["a"], token)
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "set_api_key"}}
            seen: dict = {}
            async with open_chromium(chromium_executable, request.node.name) as chromium:
                page = await chromium.new_page()
                with http.stream("POST", f"{workers.urls['a']}/mcp", headers=headers, json=call) as stream:
                    for message in sse_messages(stream.iter_lines()):
                        if message.get("method") == "elicitation/create":
                            link = workers.on("b", message["params"]["url"])
                            seen.update(await sign_in_and_read(page, link, user.get_username(), "secure-input-on-b"))
                            await page.fill("#value", "sk-in-chromium")
                            async with page.expect_navigation():
                                await page.click("#save")
                            seen["done"] = await page.inner_text("#outcome")
                            posted = http.post(f"{workers.urls['b']}/mcp", headers=headers, json=answer(message["id"]))
                            seen["posted"] = posted.status_code
                        elif message.get("id") == 2:
                            seen["final"] = message
                            break
                seen["posts"] = same_origin_posts(chromium, workers.urls["b"])
            return workers, seen

    workers, seen = asyncio.run(scenario())

    assert seen["url"].startswith(workers.urls["b"] + "/elicitation/")
    assert seen["client"] == HOSTILE_NAME and seen["pwned"] == "undefined"
    assert "Saved" in seen["done"] and seen["posted"] == 202
    assert seen["final"]["result"] == {"content": [{"type": "text", "text": STORED}], "isError": False}
    row = Elicitation.objects.get()
    assert (row.status, row.application_id) == ("completed", public_app.pk)
    assert StoredSecret.objects.get(user=user, name="demo_api_key").value == "sk-in-chromium"
    assert seen["posts"] and all(post["origin"] == workers.urls["b"] for post in seen["posts"])


def test_modern_connect_interstitial_in_chromium_on_the_other_worker_then_cancel(
    site, user, public_app, chromium_executable, request
):
    """2026-07-28: require_connection's link (input_required from A) opened in Chromium on B: the
    interstitial names the token's client (no session here); Cancel there; the retry on A ends
    the tool with "You did not connect"."""
    port_a, token = site
    demo_provider()

    async def scenario():
        with two_workers(port_a) as workers, httpx2.Client(timeout=30) as http:
            headers = modern_headers(token, "demo_profile")
            first = final_message(
                http.post(f"{workers.urls['a']}/mcp", headers=headers, json=modern_call("demo_profile", 1)), 1
            )["result"]
            link = workers.on("b", first["inputRequests"]["input-1"]["params"]["url"])
            async with open_chromium(chromium_executable, request.node.name) as chromium:
                page = await chromium.new_page()
                seen = await sign_in_and_read(page, link, user.get_username(), "connect-interstitial-on-b")
                seen["title"] = await page.inner_text("#interstitial-title")
                async with page.expect_navigation():
                    await page.click("#cancel")
                seen["done"] = await page.inner_text("#outcome")
            again = modern_call(
                "demo_profile", 2, requestState=first["requestState"], inputResponses={"input-1": {"action": "accept"}}
            )
            seen["retry"] = final_message(http.post(f"{workers.urls['a']}/mcp", headers=headers, json=again), 2)
            return first, seen

    first, seen = asyncio.run(scenario())

    assert first["resultType"] == "input_required"
    assert seen["title"] == "Connect Demo provider (this site)?"
    assert seen["client"] == HOSTILE_NAME and seen["pwned"] == "undefined"
    assert "Cancelled" in seen["done"]
    assert without_meta(seen["retry"]["result"]) == {
        "resultType": "complete",
        "content": [{"type": "text", "text": "You did not connect your Demo provider (this site) account."}],
        "isError": True,
    }
    row = Elicitation.objects.get()
    assert (row.status, row.session_id, row.application_id) == ("cancelled", None, public_app.pk)
