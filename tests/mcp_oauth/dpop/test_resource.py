"""DPoP on the lean ASGI lane (mcp_oauth.mcp_server.transport.asgi): a warm DPoP request is checked on the
event loop (no thread hop, like a Bearer one), and what the loop does not accept (a replay, a
stolen token) gets the exact answer from the thread path."""

from __future__ import annotations

import collections
import json

import pytest
from asgiref import sync as asgiref_sync

from mcp_oauth.mcp_server.transport.asgi import McpLane
from tests.mcp_oauth.dpop.test_proof import TOKEN_URL, exchange
from tests.support.asgi_client import asgi_call
from tests.support.dpop_helpers import DPoPKey

pytestmark = pytest.mark.django_db(transaction=True)

MCP_URL = "http://testserver/mcp"
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": META},
    }
).encode()


@pytest.fixture
def lane():
    from django.core.asgi import get_asgi_application

    return McpLane(get_asgi_application())


@pytest.fixture
def bound(client, user, public_app, resource):
    client.force_login(user)
    key = DPoPKey()
    body = exchange(client, public_app, key.proof("POST", TOKEN_URL)).json()
    return key, body["access_token"]


def headers(token: str, proof: str | None, scheme: str = "DPoP") -> dict[str, str]:
    values = {
        "authorization": f"{scheme} {token}",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    if proof is not None:
        values["dpop"] = proof
    return values


def test_a_warm_dpop_tools_call_takes_no_thread_hop(lane, bound, monkeypatch):
    key, token = bound
    status, _, body = asgi_call(lane, "POST", "/mcp", headers(token, key.proof("POST", MCP_URL, token)), CALL)
    assert status == 200, body
    hops: collections.Counter = collections.Counter()
    original = asgiref_sync.SyncToAsync.__call__

    def counting(self, *args, **kwargs):
        hops[getattr(self.func, "__qualname__", repr(self.func))] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", counting)
    status, _, body = asgi_call(lane, "POST", "/mcp", headers(token, key.proof("POST", MCP_URL, token)), CALL)
    assert status == 200, body
    assert json.loads(body)["result"]["content"][0]["text"] == "x"
    assert hops == collections.Counter()


def test_lane_refuses_replay_stolen_token_and_bearer_use(lane, bound):
    key, token = bound
    proof = key.proof("POST", MCP_URL, token)
    assert asgi_call(lane, "POST", "/mcp", headers(token, proof), CALL)[0] == 200
    for attempt in (
        headers(token, proof),  # replayed jti
        headers(token, DPoPKey().proof("POST", MCP_URL, token)),  # the thief's key
        headers(token, None, scheme="Bearer"),  # the bound token as a bearer token
    ):
        status, response_headers, body = asgi_call(lane, "POST", "/mcp", attempt, CALL)
        assert status == 401, body
        assert "DPoP " in response_headers["www-authenticate"]
    status, response_headers, body = asgi_call(lane, "POST", "/mcp", headers(token, proof), CALL)
    assert json.loads(body)["error_description"] == "The DPoP proof was used before (jti)."


def test_a_cold_token_entry_is_not_refused_as_its_own_replay(lane, bound):
    """The event loop records the proof's jti with its token lookup; on a cache miss the same
    request goes on to the thread path, which must not take that record for a replay."""
    from django.core.cache import caches

    key, token = bound
    caches["default"].clear()  # no token entry, no resource generation: the thread path
    status, _, body = asgi_call(lane, "POST", "/mcp", headers(token, key.proof("POST", MCP_URL, token)), CALL)
    assert status == 200, body
