"""One development site, two loopback spellings (mcp_oauth.shared.origins).

``BASE_URL = http://127.0.0.1:<port>`` while the client was given ``http://localhost:<port>/mcp``:
the metadata and challenges answer in the client's spelling, the token is bound to the one
registered resource, and a production site stays strict.
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_access_token_model
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.e2e.test_python_sdk import PASSWORD, USERNAME, MemoryStorage, client_metadata, live, structured  # noqa: F401
from tests.support.live import HeadlessBrowser

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def dev_site(settings, db):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": BASE}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "mcp.example.com"]
    return ensure_default_resource()


def prm(client, host: str) -> dict:
    response = client.get("/.well-known/oauth-protected-resource/mcp", HTTP_HOST=host)
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize(
    ("host", "resource"),
    [
        ("127.0.0.1:8000", "http://127.0.0.1:8000/mcp"),
        ("localhost:8000", "http://localhost:8000/mcp"),
        ("LOCALHOST:8000", "http://localhost:8000/mcp"),
        ("[::1]:8000", "http://[::1]:8000/mcp"),
        ("localhost:9000", "http://127.0.0.1:8000/mcp"),  # another port is another origin
    ],
)
def test_metadata_answers_in_the_spelling_the_client_used(client, dev_site, host, resource):
    document = prm(client, host)
    assert document["resource"] == resource
    assert document["authorization_servers"] == [BASE]  # one issuer, whatever the spelling


def test_challenge_points_to_the_metadata_in_the_clients_spelling(client, dev_site):
    response = client.post("/mcp", data="{}", content_type="application/json", HTTP_HOST="localhost:8000")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        'Bearer resource_metadata="http://localhost:8000/.well-known/oauth-protected-resource/mcp", scope="mcp"'
    )


@pytest.mark.parametrize(
    "spelling", ["http://localhost:8000/mcp", "http://[::1]:8000/mcp", "http://127.0.0.1:8000/mcp/"]
)
def test_a_loopback_spelling_designates_the_registered_resource(dev_site, spelling):
    assert select_resource([spelling]) == dev_site
    assert dev_site.uri == "http://127.0.0.1:8000/mcp"  # what tokens are bound to


@pytest.mark.parametrize(
    "foreign",
    [
        "http://localhost:8001/mcp",  # another port
        "https://localhost:8000/mcp",  # another scheme
        "http://127.0.0.2:8000/mcp",  # loopback, but not one of the three spellings
        "http://localhost.example.com:8000/mcp",
        "http://localhost:8000/other",  # another path
    ],
)
def test_other_origins_stay_foreign(dev_site, foreign):
    with pytest.raises(InvalidTarget):
        select_resource([foreign])


def test_a_token_is_accepted_at_its_resource_under_both_spellings_only(client, dev_site, user, public_app, mint_token):
    other = ProtectedResource.objects.create(uri=BASE + "/api/profile", name="Profile")
    body = '{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    headers = {"HTTP_ACCEPT": "application/json, text/event-stream", "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25"}
    good = mint_token(user, public_app, resource=dev_site.uri)
    foreign = mint_token(user, public_app, resource=other.uri)
    for host in ("127.0.0.1:8000", "localhost:8000", "[::1]:8000"):
        accepted = client.post(
            "/mcp",
            data=body,
            content_type="application/json",
            HTTP_HOST=host,
            HTTP_AUTHORIZATION=f"Bearer {good}",
            **headers,
        )
        assert accepted.status_code != 401, (host, accepted.content)
        refused = client.post(
            "/mcp",
            data=body,
            content_type="application/json",
            HTTP_HOST=host,
            HTTP_AUTHORIZATION=f"Bearer {foreign}",
            **headers,
        )
        assert refused.status_code == 401
        assert 'error="invalid_token"' in refused["WWW-Authenticate"]


def test_production_stays_strict(client, settings, db):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "https://mcp.example.com"}
    settings.ALLOWED_HOSTS = ["mcp.example.com", "localhost"]
    ensure_default_resource()
    assert prm(client, "localhost")["resource"] == "https://mcp.example.com/mcp"
    with pytest.raises(InvalidTarget):
        select_resource(["https://localhost/mcp"])
    with pytest.raises(InvalidTarget):
        select_resource(["http://localhost/mcp"])


def test_aliases_can_be_switched_off(client, dev_site, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "LOOPBACK_ALIASES": False}
    assert prm(client, "localhost:8000")["resource"] == "http://127.0.0.1:8000/mcp"
    with pytest.raises(InvalidTarget):
        select_resource(["http://localhost:8000/mcp"])


# --- the official client, pointed at the other spelling --------------------------------------


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_python_sdk_pointed_at_localhost_while_base_url_is_127_0_0_1(live):
    assert live.base.startswith("http://127.0.0.1:")
    url = f"http://localhost:{live.port}/mcp"
    browser = HeadlessBrowser(base_url=live.base, username=USERNAME, password=PASSWORD)
    pending: dict[str, str] = {}
    seen: list[str] = []

    async def redirect_handler(authorization_url: str) -> None:
        pending["url"] = authorization_url
        seen.append(f"BROWSER {authorization_url}")

    async def callback_handler() -> AuthorizationCodeResult:
        params = await browser.authorize(pending.pop("url"))
        assert "code" in params, params
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    async def record(request: httpx2.Request) -> None:
        seen.append(f"{request.method} {request.url}")

    async def run() -> dict:
        provider = OAuthClientProvider(
            server_url=url,
            client_metadata=client_metadata(live.port),
            storage=MemoryStorage(),
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
        )
        try:
            async with httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"request": [record]}) as http:
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    return structured(await client.call_tool("whoami", {}))
        finally:
            await browser.aclose()

    result = asyncio.run(run())
    assert result["user"] == USERNAME
    assert result["resource"] == f"http://127.0.0.1:{live.port}/mcp"
    assert f"GET http://localhost:{live.port}/.well-known/oauth-protected-resource/mcp" in seen
    authorize = next(entry for entry in seen if entry.startswith("BROWSER "))
    assert authorize.startswith(f"BROWSER http://127.0.0.1:{live.port}/oauth/authorize?")  # the one issuer
    assert f"resource=http%3A%2F%2Flocalhost%3A{live.port}%2Fmcp" in authorize  # the client's spelling
    assert any(entry.startswith(f"POST http://localhost:{live.port}/mcp") for entry in seen)
    issued = get_access_token_model().objects.exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)  # not RFC 7592's
    assert [token.resource for token in issued] == [[f"http://127.0.0.1:{live.port}/mcp"]]
