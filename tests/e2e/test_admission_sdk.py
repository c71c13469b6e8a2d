"""The official Python SDK client (``mcp``) against a live server that sheds or rate-limits, both
eras: the refusal reaches the caller as the JSON-RPC error of the 429/503 body (``MCPError`` with
its code and data), and calls succeed again once the bucket has tokens or a place is free."""

from __future__ import annotations

import asyncio
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from mcp_oauth.mcp_server.transport import admission
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port, run_asgi_server

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def live(settings):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    resource = ensure_default_resource()
    from project.asgi import application

    with run_asgi_server(application, port) as url:
        yield url, resource


async def _calls(mcp_url: str, token: str, mode: str, n: int, pause: float = 0.0) -> list:
    outcomes = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        async with Client(streamable_http_client(mcp_url, http_client=http), mode=mode) as client:
            for i in range(n):
                try:
                    result = await client.call_tool("echo", {"text": f"call {i}"})
                    outcomes.append(result.content[0].text)
                except Exception as exc:  # noqa: BLE001 - what the SDK raises is what the test reads
                    outcomes.append(exc)
                if pause:
                    await asyncio.sleep(pause)
    return outcomes


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_client_sees_the_rate_limit_and_recovers(live, mode, settings, user, public_app, mint_token):
    base, resource = live
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_RATE_LIMIT": {"rate": 4, "burst": 10}}
    token = mint_token(user, public_app, "mcp", resource.uri)
    outcomes = asyncio.run(_calls(base + "/mcp", token, mode, 20))
    errors = [o for o in outcomes if not isinstance(o, str)]
    assert errors  # 20 calls (plus the handshake) back to back against a burst of 10
    for i, outcome in enumerate(outcomes):  # each call its own result, or the rate-limit error
        if isinstance(outcome, str):
            assert outcome == f"call {i}"
        else:
            assert isinstance(outcome, MCPError)
            assert (outcome.code, outcome.message, outcome.data) == (
                -32029,
                "Rate limit exceeded",
                {"reason": "rate_limit", "retryAfter": 1},
            )
    time.sleep(2.6)  # the bucket full again (10 tokens): a new client's handshake and one call
    assert asyncio.run(_calls(base + "/mcp", token, mode, 1)) == ["call 0"]


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_client_sees_the_in_flight_bound_and_recovers(live, mode, settings, user, public_app, mint_token):
    """The live server runs in this process: the test holds the worker's places itself (4: the
    2026-07-28 client sends some requests of its handshake concurrently)."""
    base, resource = live
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_MAX_IN_FLIGHT": 4}
    token = mint_token(user, public_app, "mcp", resource.uri)
    assert asyncio.run(_calls(base + "/mcp", token, mode, 1)) == ["call 0"]
    deadline = time.monotonic() + 5
    while admission.in_flight.count and time.monotonic() < deadline:  # the client's DELETE, if still in flight
        time.sleep(0.01)
    held = [admission.admit() for _ in range(4)]
    assert None not in held
    try:
        try:  # legacy: the handshake is refused (no session); 2026-07-28: the call is
            refused: BaseException | str = asyncio.run(_calls(base + "/mcp", token, mode, 1))[0]
        except BaseException as exc:  # noqa: BLE001 - the SDK's own error (in an exception group)
            refused = exc
    finally:
        for ticket in held:
            ticket.leave()
    errors = [refused]
    while errors and not isinstance(errors[0], MCPError):  # unwrap an exception group
        errors = list(getattr(errors[0], "exceptions", ()))
    assert errors, repr(refused)
    assert (errors[0].code, errors[0].message, errors[0].data) == (
        -32000,
        "Server overloaded",
        {"reason": "in_flight", "retryAfter": 1},
    )
    assert asyncio.run(_calls(base + "/mcp", token, mode, 1)) == ["call 0"]
