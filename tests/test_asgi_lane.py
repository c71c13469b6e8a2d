"""The lean ASGI lane (mcp_oauth.transport.asgi): the MCP endpoint served before Django's
middleware stack with the same view, every other path by Django unchanged."""

from __future__ import annotations

import asyncio
import collections
import json

import pytest
from asgiref import sync as asgiref_sync
from asgiref.sync import async_to_sync

from mcp_oauth.transport.asgi import McpLane

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def lane():
    from django.core.asgi import get_asgi_application

    return McpLane(get_asgi_application())


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


def asgi_call(app, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> tuple[int, dict, bytes]:
    """One request through an ASGI app; returns (status, headers, body)."""
    sent: list[dict] = []

    async def run():
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        done = asyncio.Event()

        async def receive():
            if messages:
                return messages.pop(0)
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": [(k.lower().encode(), v.encode()) for k, v in {"host": "testserver", **headers}.items()],
            "client": ("127.0.0.1", 5000),
            "server": ("testserver", 80),
        }
        await app(scope, receive, send)

    async_to_sync(run)()
    start = next(m for m in sent if m["type"] == "http.response.start")
    response_headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], response_headers, data


def mcp(token, session=None):
    headers = {"authorization": f"Bearer {token}", "accept": ACCEPT, "content-type": "application/json"}
    if session:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    return headers


INIT = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "lane", "version": "1"}},
    }
).encode()
CALL = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi", "times": 2}},
    }
).encode()


def test_tools_call_through_the_lane_skips_the_middleware(lane, token):
    status, headers, body = asgi_call(lane, "POST", "/mcp", mcp(token), INIT)
    assert status == 200, body
    session = headers["mcp-session-id"]
    assert "x-frame-options" not in headers  # XFrameOptionsMiddleware did not run
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    status, headers, body = asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)
    assert status == 200
    # the tool sent no notification first: a plain JSON answer (MCP: JSON or SSE, client supports both)
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "jsonrpc": "2.0",
        "id": 2,
        "result": {"content": [{"type": "text", "text": "hi hi"}], "isError": False},
    }


def test_other_paths_go_to_django_with_its_middleware(lane, resource):
    status, headers, body = asgi_call(lane, "GET", "/.well-known/oauth-protected-resource/mcp", {})
    assert status == 200
    assert json.loads(body)["resource"] == resource.uri
    assert headers["x-frame-options"] == "DENY"  # Django's middleware ran


def test_no_token_is_the_same_challenge(lane, resource):
    status, headers, _ = asgi_call(lane, "POST", "/mcp", {"accept": ACCEPT, "content-type": "application/json"}, INIT)
    assert status == 401
    assert headers["www-authenticate"].startswith('Bearer resource_metadata="http://testserver/.well-known/')


def test_a_warm_tools_call_of_an_async_tool_takes_no_thread_hop(lane, token, monkeypatch):
    """Issue 12: no sync/async thread hop when the tool is async and everything hits the cache."""
    status, headers, _ = asgi_call(lane, "POST", "/mcp", mcp(token), INIT)
    session = headers["mcp-session-id"]
    asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)  # warm caches
    hops: collections.Counter = collections.Counter()
    original = asgiref_sync.SyncToAsync.__call__

    def counting(self, *args, **kwargs):
        hops[getattr(self.func, "__qualname__", repr(self.func))] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(asgiref_sync.SyncToAsync, "__call__", counting)
    status, _, _ = asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)
    assert status == 200
    # token, resource and session from the caches on the event loop; the echo tool is async;
    # no database connection was opened, so request_finished runs on the loop
    assert hops == collections.Counter()


def test_a_cold_call_hops_to_one_pooled_thread_and_returns_it(lane, token, monkeypatch):
    from mcp_oauth.transport import asgi as lane_module

    threads: list = []
    original = lane_module.RequestThread

    class Recording(original):
        def __init__(self) -> None:
            super().__init__()
            threads.append(self)

    monkeypatch.setattr(lane_module, "RequestThread", Recording)
    status, headers, _ = asgi_call(lane, "POST", "/mcp", mcp(token), INIT)  # cold: database
    assert status == 200
    assert threads[0].calls >= 2 and not threads[0].used  # returned to the pool after the response
    idle = len(lane_module._threads._idle)
    assert idle >= 1
    status, _, _ = asgi_call(lane, "POST", "/mcp", mcp(token, headers["mcp-session-id"]), CALL)
    assert status == 200
    assert len(lane_module._threads._idle) == idle  # the pooled thread came back; no new one kept
