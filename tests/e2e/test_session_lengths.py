"""End to end: session lengths with the official MCP Python SDK client (docs/how-to/session-lengths.md).

* With a short access-token lifetime (the protected resource's ``access_token_lifetime``, 2 s) the
  SDK keeps calling tools across several expiries in one session without a new login: it refreshes
  (each refresh rotates the pair), in both protocol eras (``mode="legacy"``: a 2025-11-25 session;
  ``"auto"``: 2026-07-28).
* Past the absolute session cap (``MCP_OAUTH["SESSION_MAX_SECONDS"]``, 10 s here) the next refresh
  is refused ``invalid_grant`` (audited ``session.cap_reached``), the SDK starts a new authorization
  and the user sees the consent page again; the new session works.

The TypeScript SDK's side is in tests/e2e/test_ts_sdk_session_lengths.py.
"""

from __future__ import annotations

import asyncio
import time

import httpx2
import pytest
from django.db import connection
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_access_token_model
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models import AuditEvent, ProtectedResource, RefreshGeneration
from tests.e2e.test_python_sdk import (  # noqa: F401 - live is a fixture
    PASSWORD,
    USERNAME,
    MemoryStorage,
    assert_whoami,
    live,
    make_provider,
    run,
    with_browser,
)
from tests.support.live import HeadlessBrowser

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ACCESS_SECONDS = 2
CAP_SECONDS = 10


def short_access_tokens(live, seconds: int = ACCESS_SECONDS) -> None:
    """The default resource's own access-token lifetime (the site's stays 3600 s)."""
    resource = ProtectedResource.objects.get(uri=live.mcp_url)
    resource.access_token_lifetime = seconds
    resource.save()  # bumps the resource registry


async def timed_calls(live, provider, mode: str, pauses: list[float], before_call=None) -> list:
    """One SDK session: a ``whoami`` call, then after each pause another one (seconds, or a function
    computing them, called in a thread: it may query the database)."""

    async def record(response: httpx2.Response) -> None:
        body = response.request.content.decode("latin-1") if response.request.url.path == "/oauth/token" else ""
        grant = "refresh_token" if "grant_type=refresh_token" in body else ("code" if body else None)
        live.exchanges.append((response.request.method, response.request.url.path, response.status_code, grant))

    results = []
    async with httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [record]}) as http:
        async with Client(streamable_http_client(live.mcp_url, http_client=http), mode=mode) as client:
            results.append(await client.call_tool("whoami", {}))
            for pause in pauses:
                await asyncio.sleep(await asyncio.to_thread(_closing(pause)) if callable(pause) else pause)
                results.append(await client.call_tool("whoami", {}))
    return results


def _closing(function):
    """``function`` giving its thread's database connection back to the pool when done (a worker
    thread's connection is otherwise never returned: the test process's pool runs dry)."""

    def run():
        try:
            return function()
        finally:
            connection.close()

    return run


def token_calls(live, status: int | None = None, grant: str | None = None) -> list:
    return [
        e
        for e in live.exchanges
        if e[1] == "/oauth/token" and (status is None or e[2] == status) and (grant is None or e[3] == grant)
    ]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_refreshes_across_short_access_tokens(live, mode):
    short_access_tokens(live)
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    pause = ACCESS_SECONDS + 0.5
    results = run(with_browser(browser, timed_calls(live, make_provider(live, storage, browser), mode, [pause] * 3)))

    client_id = storage.client_info.client_id
    assert len(results) == 4
    for result in results:
        assert_whoami(result, client_id)
    assert len(browser.consent_pages) == 1  # one login, one consent: every later token came by refresh
    assert len(token_calls(live, 200, "code")) == 1
    assert len(token_calls(live, 200, "refresh_token")) >= 3
    assert not token_calls(live, 400)
    assert not [e for e in live.exchanges if e[2] >= 500]
    # the stored expiry agrees with the expires_in the SDK was given (the resource's 2 s)
    tokens = get_access_token_model().objects.filter(application__client_id=client_id)
    for token in tokens.exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE):  # not RFC 7592's
        assert 0 < (token.expires - token.created).total_seconds() <= ACCESS_SECONDS + 0.5
    # one session (refresh-token family) throughout, its start carried by every rotation
    assert RefreshGeneration.objects.values("session_started_at").distinct().count() == 1


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_past_the_session_cap_the_python_sdk_is_sent_to_consent_again(live, settings, mode):
    short_access_tokens(live, 3)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": CAP_SECONDS}
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)

    def until_past_the_cap() -> float:
        started = RefreshGeneration.objects.order_by("created_at").values_list("session_started_at", flat=True)[0]
        return max(0.0, started.timestamp() + CAP_SECONDS + 0.5 - time.time())

    # a call, a refresh within the cap (3.5 s on), then a call once the cap has passed
    results = run(
        with_browser(browser, timed_calls(live, make_provider(live, storage, browser), mode, [3.5, until_past_the_cap]))
    )

    client_id = storage.client_info.client_id
    for result in results:
        assert_whoami(result, client_id)
    refused = token_calls(live, 400, "refresh_token")
    assert len(refused) == 1, live.exchanges
    assert len(token_calls(live, 200, "refresh_token")) >= 1  # refreshed before the cap
    assert len(token_calls(live, 200, "code")) == 2  # then a new authorization
    # the user was shown the consent page again (not skipped), and approved it
    assert len(browser.consent_pages) == 2
    assert "e2e Python SDK client" in browser.consent_pages[1]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SESSION_CAP_REACHED)
    assert event.client_id == client_id and event.detail["session_max_seconds"] == CAP_SECONDS
    assert RefreshGeneration.objects.values("session_started_at").distinct().count() == 2  # a new session
