"""subscriptions/listen (mcp_oauth.mcp_server.transport.subscriptions): acknowledged, then what was asked is relayed; a server that does not stream refuses it."""

from __future__ import annotations

import asyncio
import json

from asgiref.sync import async_to_sync
from django.test import AsyncClient

from mcp_oauth.mcp_server.transport.subscriptions import publish_list_changed
from tests.mcp_oauth.mcp_server.transport.test_modern import (  # noqa: F401 - fixtures
    ACCEPT,
    FULL_CAPS,
    V,
    _registry,
    body,
    envelope,
    error_of,
    headers,
    parse_sse,
    post,
    token,
)


def test_subscriptions_listen_acknowledges_then_relays_what_was_asked(token):
    async def go():
        aclient = AsyncClient()
        message = body(
            "subscriptions/listen",
            {"notifications": {"toolsListChanged": True, "promptsListChanged": True}},
            id="listen-1",
        )
        response = await aclient.post(
            "/mcp", json.dumps(message), content_type="application/json", headers=headers(token, "subscriptions/listen")
        )
        assert response["Content-Type"] == "text/event-stream"
        stream = response.streaming_content.__aiter__()
        buffer = b""
        while not parse_sse(buffer):
            buffer += await stream.__anext__()
        publish_list_changed("resources")  # not asked for: never delivered
        publish_list_changed("tools")
        while len(parse_sse(buffer)) < 2:
            buffer += await asyncio.wait_for(stream.__anext__(), 5)
        await stream.aclose()
        return parse_sse(buffer)

    ack, changed = async_to_sync(go)()
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": {"toolsListChanged": True, "promptsListChanged": True},
            "_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"},
        },
    }
    assert changed == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "listen-1"}},
    }


def test_subscriptions_listen_needs_a_streaming_server(client, token):
    response = post(client, token, body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600
