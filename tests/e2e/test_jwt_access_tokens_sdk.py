"""JWT access tokens (RFC 9068) end to end on loopback: a real ASGI server (the reference site, lean
lanes included) serving a resource that opted in, the official Python SDK client (``mcp`` 2.3.0)
in both eras with a bearer JWT and with a DPoP-bound JWT (``cnf.jkt``), and a revoked JWT refused
through the deny-list."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import Generator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.dpop_helpers import DPoPAuth, DPoPKey
from tests.support.live import free_port, run_asgi_server
from tests.support.oauth_helpers import live_code_tokens

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PING = '{"jsonrpc":"2.0","id":1,"method":"ping"}'


class BearerAuth(httpx2.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def claims_of(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


@pytest.fixture
def live(settings, django_user_model):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    resource.jwt_access_tokens = True
    resource.save()
    signing_keys.rotate()
    user = django_user_model.objects.create_user("jwt", "jwt@example.com", "pw-" + secrets.token_hex(4))
    from project.asgi import application

    with run_asgi_server(application, port) as url:
        yield url, user


def _tokens(base: str, user, key: DPoPKey | None = None) -> tuple[dict, object]:
    return live_code_tokens(base, user, key, name="jwt e2e")


async def _sdk_calls(mcp_url: str, auth: httpx2.Auth, mode: str) -> list:
    async with httpx2.AsyncClient(auth=auth, timeout=30) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http), mode=mode) as client:
            return [await client.call_tool("echo", {"text": f"jwt {i}"}) for i in range(3)]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_official_python_client_calls_tools_with_a_jwt_access_token(live, mode):
    base, user = live
    tokens, app = _tokens(base, user)
    token = tokens["access_token"]
    assert claims_of(token)["aud"] == base + "/mcp" and claims_of(token)["client_id"] == app.client_id
    results = asyncio.run(_sdk_calls(base + "/mcp", BearerAuth(token), mode))
    assert [result.content[0].text for result in results] == ["jwt 0", "jwt 1", "jwt 2"]

    revoked = httpx2.post(base + "/oauth/revoke", data={"token": token, "client_id": app.client_id})
    assert revoked.status_code == 200
    refused = httpx2.post(base + "/mcp", content=PING, headers={**HEADERS, "Authorization": f"Bearer {token}"})
    assert refused.status_code == 401
    assert 'error="invalid_token"' in refused.headers["WWW-Authenticate"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_a_dpop_bound_jwt_carries_cnf_jkt_and_needs_the_key(live, mode):
    base, user = live
    key = DPoPKey()
    tokens, _ = _tokens(base, user, key)
    assert tokens["token_type"] == "DPoP"
    token = tokens["access_token"]
    assert claims_of(token)["cnf"] == {"jkt": key.thumbprint}
    results = asyncio.run(_sdk_calls(base + "/mcp", DPoPAuth(key, token), mode))
    assert [result.content[0].text for result in results] == ["jwt 0", "jwt 1", "jwt 2"]
    thief = DPoPKey()
    for auth_headers in (
        {"Authorization": f"DPoP {token}", "DPoP": thief.proof("POST", base + "/mcp", token)},
        {"Authorization": f"Bearer {token}"},
    ):
        refused = httpx2.post(base + "/mcp", content=PING, headers={**HEADERS, **auth_headers})
        assert refused.status_code == 401
        assert "DPoP " in refused.headers["WWW-Authenticate"]
