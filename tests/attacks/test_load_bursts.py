"""Bursts on a live server (uvicorn on loopback, 200 requests, 20 at a time: the PostgreSQL
connection limit is shared): the token-exchange grant and a DRF view as a tool (``notes_list``).
Each answer is 200, or 429/503 with ``Retry-After``; never a 5xx otherwise, and no exchanged token's
actor row without its token."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.token_exchange.decision import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.models import TokenActor
from mcp_oauth.resource_server.cache import token_checksum
from tests.support.notes_api import notes_world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BURST = 200
AT_ONCE = 20


def burst(send) -> list[requests.Response]:
    def one(_):
        with requests.Session() as session:
            return send(session)

    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        return list(pool.map(one, range(BURST)))


def assert_answered(responses: list[requests.Response]) -> list[requests.Response]:
    """Every answer 200 or a refusal with Retry-After; returns the 200s."""
    for response in responses:
        assert response.status_code in (200, 429, 503), (response.status_code, response.text[:300])
        if response.status_code != 200:
            assert response.headers.get("Retry-After", "").isdigit(), response.headers
    return [response for response in responses if response.status_code == 200]


def test_a_burst_of_token_exchanges(notes_world, mint_token):
    app = get_application_model().objects.get(name="SDK")
    subject = mint_token(notes_world.alice, app, scope="mcp profile", resource=notes_world.base + "/mcp")
    data = {
        "grant_type": TOKEN_EXCHANGE_GRANT_TYPE,
        "client_id": app.client_id,
        "subject_token": subject,
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "resource": notes_world.base + "/api",
        "scope": "profile",
    }
    issued = assert_answered(burst(lambda s: s.post(notes_world.base + "/oauth/token", data=data, timeout=60)))
    assert issued
    actors = set(TokenActor.objects.values_list("token_checksum", flat=True))
    tokens = set(get_access_token_model().objects.values_list("token_checksum", flat=True))
    assert actors <= tokens
    assert actors == {token_checksum(response.json()["access_token"]) for response in issued}


def test_a_burst_of_tool_calls(notes_world):
    headers = {
        "Authorization": f"Bearer {notes_world.mcp_tokens['alice']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "burst", "version": "1"},
        },
    }
    initialized = requests.post(notes_world.mcp_url, json=initialize, headers=headers, timeout=30)
    assert initialized.status_code == 200
    if initialized.headers.get("Mcp-Session-Id"):
        headers["Mcp-Session-Id"] = initialized.headers["Mcp-Session-Id"]
    notified = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert requests.post(notes_world.mcp_url, json=notified, headers=headers, timeout=30).status_code == 202
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "notes_list", "arguments": {}}}
    answered = assert_answered(burst(lambda s: s.post(notes_world.mcp_url, json=call, headers=headers, timeout=60)))
    for response in answered:
        assert '"Groceries"' in response.text and '"isError":true' not in response.text.replace(" ", "")
