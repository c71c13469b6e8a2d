"""End to end: the official MCP Python SDK client calls the reference site's ``my_site_profile`` tool,
which exchanges the caller's token (RFC 8693, ``ctx.exchange_token``) for a token of the site's
second protected resource (``<site>/api``) and calls ``/api/profile`` with it over HTTP; in both
protocol eras (2025-11-25 ``legacy``, 2026-07-28 ``auto``)."""

from __future__ import annotations

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.token_exchange.decision import TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.models import AuditEvent, ProtectedResource, TokenActor
from mcp_oauth.resource_server.cache import bump_resource_generation
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.e2e.test_python_sdk import (  # noqa: F401 - the live fixture
    PASSWORD,
    USERNAME,
    MemoryStorage,
    live,
    make_provider,
    run,
    structured,
    with_browser,
)
from tests.support.live import HeadlessBrowser

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


async def call_tools(live, provider, mode: str) -> dict:
    async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
        async with Client(streamable_http_client(live.mcp_url, http_client=http), mode=mode) as client:
            whoami = await client.call_tool("whoami", {})
            profile = await client.call_tool("my_site_profile", {})
    return {"whoami": whoami, "profile": profile}


@pytest.fixture
def api(live):
    from project.apps import ensure_api_resource

    # The MCP endpoint advertises (RFC 9728) and so the SDK asks for both scopes: the tool's and the API's.
    resource = ensure_default_resource()
    ProtectedResource.objects.filter(pk=resource.pk).update(scopes="mcp profile")
    bump_resource_generation()
    return ensure_api_resource()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_tool_exchanges_the_token_and_calls_the_api(live, api, mode):
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    seen = run(with_browser(browser, call_tools(live, make_provider(live, storage, browser), mode)))

    whoami = structured(seen["whoami"])
    assert "profile" in whoami["scopes"]
    result = seen["profile"]
    assert not result.is_error, result
    data = structured(result)
    assert data["profile"]["username"] == USERNAME
    assert data["token"]["scope"] == "profile"
    assert 0 < data["token"]["expires_in"] <= 3600

    client_id = storage.client_info.client_id
    exchanged = get_access_token_model().objects.get(resource=[api.uri])
    assert exchanged.application.client_id == client_id
    assert exchanged.user.username == USERNAME
    assert exchanged.scope == "profile"
    assert TokenActor.objects.get(token_checksum=exchanged.token_checksum).act == {"sub": client_id}
    subject = get_access_token_model().objects.get(resource=[live.mcp_url])
    assert exchanged.expires <= subject.expires
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_ISSUED, detail__grant_type=TOKEN_EXCHANGE_GRANT_TYPE)
    assert event.count() == 1
    assert event.get().detail["client_auth"] == "subject_token"
    # the MCP token itself is refused by the API (RFC 8707 audience): only the exchange gets there
    refused = httpx2.get(live.base + "/api/profile", headers={"Authorization": f"Bearer {storage.tokens.access_token}"})
    assert refused.status_code == 401


def test_tool_without_the_profile_scope_reports_it(live, mode="auto"):
    from project.apps import ensure_api_resource

    ensure_api_resource()  # the MCP endpoint advertises "mcp" only: the caller's token lacks "profile"
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    seen = run(with_browser(browser, call_tools(live, make_provider(live, storage, browser), mode)))
    result = seen["profile"]
    assert result.is_error
    assert "profile scope" in result.content[0].text
    assert not TokenActor.objects.exists()
    refusal = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_EXCHANGE_REFUSED)
    assert refusal.detail["error"] == "invalid_scope"
