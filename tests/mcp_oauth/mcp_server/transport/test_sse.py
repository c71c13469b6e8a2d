"""Server-Sent Events at the MCP endpoint under ASGI (mcp_oauth.mcp_server.transport.sse): tools/call streamed, the GET stream (order, resumption, end), cancellation, server-to-client requests."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.mcp_server.transport.views import McpView
from mcp_oauth.models import McpSessionEvent
from tests.mcp_oauth.mcp_server.transport.test_views import (  # noqa: F401 - fixtures
    ACCEPT_BOTH,
    INIT_PARAMS,
    REGISTRY,
    _registry,
    add,
    admin_only,
    asgi,
    async_initialize,
    client,
    initialize,
    mcp_headers,
    needs_url,
    parse_sse,
    post,
    read_events,
    request,
    slow_steps,
    token,
)


def test_tool_call_streams_notifications_then_the_result_under_asgi(token):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        await aclient.post(
            "/mcp",
            json.dumps(request("logging/setLevel", {"level": "info"})),
            content_type="application/json",
            headers=mcp_headers(token, session_id),
        )
        params = {"name": "slow_steps", "arguments": {"steps": 3}, "_meta": {"progressToken": "tok-1"}}
        response = await aclient.post(
            "/mcp",
            json.dumps(request("tools/call", params, id=9)),
            content_type="application/json",
            headers=mcp_headers(token, session_id),
        )
        assert response.status_code == 200
        assert response["Content-Type"] == "text/event-stream"
        assert response["Cache-Control"] == "no-cache, no-transform"
        return parse_sse(b"".join([chunk async for chunk in response.streaming_content]))

    events = asgi(go)
    messages = [event["data"] for event in events]
    assert [m.get("method") for m in messages] == [
        "notifications/progress",
        "notifications/progress",
        "notifications/progress",
        "notifications/message",
        None,
    ]
    assert messages[0]["params"] == {"progressToken": "tok-1", "progress": 1, "total": 3, "message": "step 1"}
    assert messages[3]["params"] == {"level": "info", "data": {"finished": 3}}  # "debug" is below the level
    assert messages[-1] == {
        "jsonrpc": "2.0",
        "id": 9,
        "result": {"content": [{"type": "text", "text": "did 3 steps"}], "isError": False},
    }
    ids = [event["id"] for event in events]
    assert all(ids) and len(set(ids)) == len(ids)
    assert all(event["event"] == "message" for event in events)


def test_non_tool_requests_stay_json_under_asgi_and_errors_before_running_are_json(token):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        headers = mcp_headers(token, session_id)
        ping = await aclient.post("/mcp", json.dumps(request("ping")), content_type="application/json", headers=headers)
        bad = await aclient.post(
            "/mcp",
            json.dumps(request("tools/call", {"name": "add", "arguments": {}})),
            content_type="application/json",
            headers=headers,
        )
        scope = await aclient.post(
            "/mcp",
            json.dumps(request("tools/call", {"name": "admin_only"})),
            content_type="application/json",
            headers=headers,
        )
        return ping, bad, scope

    ping, bad, scope = asgi(go)
    assert ping["Content-Type"] == "application/json" and ping.json()["result"] == {}
    assert bad["Content-Type"] == "application/json" and bad.json()["result"]["isError"] is True
    assert scope.status_code == 403 and 'error="insufficient_scope"' in scope["WWW-Authenticate"]


def test_mcp_error_is_streamed_as_the_response_under_asgi(token):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        response = await aclient.post(
            "/mcp",
            json.dumps(request("tools/call", {"name": "needs_url"}, id=3)),
            content_type="application/json",
            headers=mcp_headers(token, session_id),
        )
        return parse_sse(b"".join([chunk async for chunk in response.streaming_content]))

    (event,) = asgi(go)
    assert event["data"]["error"]["code"] == -32042 and event["data"]["id"] == 3


def test_get_stream_delivers_the_outbox_in_order_and_then_live_messages(token):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        other_session = await async_initialize(aclient, token)
        enqueue = sync_to_async(enqueue_session_message)
        await enqueue(session_id, {"method": "notifications/first", "params": {"n": 1}})
        await enqueue(other_session, {"method": "notifications/not-yours"})
        await enqueue(session_id, {"jsonrpc": "2.0", "method": "notifications/second"})
        response = await aclient.get("/mcp", headers=mcp_headers(token, session_id, Accept="text/event-stream"))
        assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
        stream = response.streaming_content.__aiter__()
        try:
            first_two = await read_events(stream, 2)
            await enqueue(session_id, {"method": "notifications/third"})
            all_three = first_two + (await read_events(stream, 1))
        finally:
            await stream.aclose()
        return all_three, session_id

    events, session_id = asgi(go)
    rows = list(McpSessionEvent.objects.filter(session_id=session_id).values_list("id", flat=True))
    assert [event["id"] for event in events] == [str(row) for row in rows]
    assert [event["data"]["method"] for event in events] == [
        "notifications/first",
        "notifications/second",
        "notifications/third",
    ]
    assert events[0]["data"] == {"jsonrpc": "2.0", "method": "notifications/first", "params": {"n": 1}}


def test_get_stream_resumes_after_last_event_id(token):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        other_session = await async_initialize(aclient, token)
        enqueue = sync_to_async(enqueue_session_message)
        rows = [await enqueue(session_id, {"method": f"notifications/n{i}"}) for i in range(4)]
        foreign = await enqueue(other_session, {"method": "notifications/foreign"})
        response = await aclient.get(
            "/mcp",
            headers=mcp_headers(token, session_id, Accept="text/event-stream", **{"Last-Event-ID": str(rows[1].id)}),
        )
        stream = response.streaming_content.__aiter__()
        try:
            events = await read_events(stream, 2)
        finally:
            await stream.aclose()
        # an id of another session's row does not leak that session's messages
        response = await aclient.get(
            "/mcp",
            headers=mcp_headers(
                token, session_id, Accept="text/event-stream", **{"Last-Event-ID": str(foreign.id - 1)}
            ),
        )
        stream = response.streaming_content.__aiter__()
        try:
            await enqueue(session_id, {"method": "notifications/after-foreign"})
            later = await read_events(stream, 1)
        finally:
            await stream.aclose()
        return rows, events, later

    rows, events, later = asgi(go)
    assert [event["id"] for event in events] == [str(rows[2].id), str(rows[3].id)]
    assert [event["data"]["method"] for event in events] == ["notifications/n2", "notifications/n3"]
    assert [event["data"]["method"] for event in later] == ["notifications/after-foreign"]


def test_get_stream_ends_when_the_session_is_deleted(token):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        response = await aclient.get("/mcp", headers=mcp_headers(token, session_id, Accept="text/event-stream"))
        stream = response.streaming_content.__aiter__()
        first = await stream.__anext__()
        deleted = await aclient.delete("/mcp", headers=mcp_headers(token, session_id))
        rest = [chunk async for chunk in stream]  # ends by itself
        return first, deleted.status_code, rest

    first, status, rest = asgi(go)
    assert first.startswith(b":") and status == 204
    assert parse_sse(b"".join(rest)) == []


@pytest.mark.parametrize("accept", ["application/json", "text/html"])
def test_get_needs_event_stream_accept(token, accept):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        return await aclient.get("/mcp", headers=mcp_headers(token, session_id, Accept=accept))

    response = asgi(go)
    assert response.status_code == 406 and response.json()["error"]["code"] == -32600


@pytest.mark.parametrize("last_event_id", ["abc", "r1a2b3-4", "-1", "1.5", "9" * 40, "\u00b2"])
def test_get_with_an_unusable_last_event_id_is_400(token, last_event_id):
    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        return await aclient.get(
            "/mcp",
            headers=mcp_headers(token, session_id, Accept="text/event-stream", **{"Last-Event-ID": last_event_id}),
        )

    assert asgi(go).status_code == 400


def test_get_needs_a_session_of_the_same_principal(token, resource, other_user, public_app, mint_token):
    intruder = mint_token(other_user, public_app, resource=resource.uri)

    async def go():
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        missing = await aclient.get("/mcp", headers=mcp_headers(token, Accept="text/event-stream"))
        foreign = await aclient.get("/mcp", headers=mcp_headers(intruder, session_id, Accept="text/event-stream"))
        return missing.status_code, foreign.status_code

    assert asgi(go) == (400, 404)


def test_cancelled_notification_stops_a_streaming_tool(token):
    """MCP "Cancellation": the tool is cancelled and no response is sent on its stream."""
    reg = ToolRegistry("cancel")
    gate: dict = {}

    async def wait_forever(ctx: ToolContext) -> str:
        gate["running"].set()
        await asyncio.Event().wait()
        return "never"

    reg.register(wait_forever)
    view = McpView.as_view(registry=reg)

    async def go():
        from django.test import AsyncRequestFactory

        gate["running"] = asyncio.Event()
        factory = AsyncRequestFactory()
        aclient = AsyncClient()
        session_id = await async_initialize(aclient, token)
        headers = mcp_headers(token, session_id)
        body = json.dumps(request("tools/call", {"name": "wait_forever"}, id=41))
        req = factory.post("/mcp", body, content_type="application/json", headers=headers)
        pending = asyncio.ensure_future(view(req))  # nothing sent yet: the response has not started
        await gate["running"].wait()
        cancel = factory.post(
            "/mcp",
            json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}),
            content_type="application/json",
            headers=headers,
        )
        accepted = await view(cancel)
        response = await pending
        stream = response.streaming_content.__aiter__()
        try:
            chunk = await stream.__anext__()
        except StopAsyncIteration:
            chunk = None
        return accepted.status_code, response.status_code, response["Content-Type"], chunk

    status, response_status, content_type, chunk = asgi(go)
    assert status == 202
    # an SSE stream that closes without a response ("Cancellation": no response is sent)
    assert (response_status, content_type, chunk) == (200, "text/event-stream", None)


def test_server_to_client_request_is_answered_by_a_later_post(token, resource, other_user, public_app, mint_token):
    """A tool asks the client (e.g. elicitation/create) on its stream; the client POSTs the answer."""
    reg = ToolRegistry("ask")

    async def ask(ctx: ToolContext) -> dict:
        schema = {"type": "object", "properties": {}}
        answer = await ctx.send_request(
            "elicitation/create", {"mode": "form", "message": "Name?", "requestedSchema": schema}
        )
        return {"answer": answer}

    reg.register(ask)
    view = McpView.as_view(registry=reg)
    intruder = mint_token(other_user, public_app, resource=resource.uri)

    async def go():
        from django.test import AsyncRequestFactory

        factory = AsyncRequestFactory()
        session_id = await async_initialize(AsyncClient(), token)
        headers = mcp_headers(token, session_id)

        def post_message(message, with_headers=headers):
            return view(
                factory.post("/mcp", json.dumps(message), content_type="application/json", headers=with_headers)
            )

        response = await post_message(request("tools/call", {"name": "ask"}, id=5))
        stream = response.streaming_content.__aiter__()
        (asked,) = await read_events(stream, 1)
        server_request = asked["data"]
        # another principal cannot answer in this session's place
        decline = {"jsonrpc": "2.0", "id": server_request["id"], "result": {"action": "decline"}}
        intruding = await post_message(decline, mcp_headers(intruder, session_id))
        assert intruding.status_code == 404
        accept = {
            "jsonrpc": "2.0",
            "id": server_request["id"],
            "result": {"action": "accept", "content": {"name": "Zed"}},
        }
        answered = await post_message(accept)
        rest = parse_sse(b"".join([chunk async for chunk in stream]))
        return server_request, answered.status_code, rest

    server_request, status, rest = asgi(go)
    assert server_request["method"] == "elicitation/create" and isinstance(server_request["id"], str)
    assert status == 202
    assert rest[-1]["data"]["result"]["structuredContent"] == {
        "answer": {"action": "accept", "content": {"name": "Zed"}}
    }


@pytest.mark.parametrize("how", ["aclose", "cancel"])
def test_a_client_leaving_the_stream_does_not_cancel_the_request(how):
    """MCP "Sending Messages to the Server": disconnection is not cancellation; the request finishes."""
    from mcp_oauth.mcp_server.transport.sse import request_stream

    finished = []

    async def go():
        gate = asyncio.Event()

        async def run(sink):
            await sink({"jsonrpc": "2.0", "method": "notifications/first"})
            await gate.wait()
            finished.append(True)
            return {"jsonrpc": "2.0", "id": 1, "result": {}}

        stream = request_stream(run, keepalive_seconds=60)
        first = await stream.__anext__()
        assert parse_sse(first)[0]["data"]["method"] == "notifications/first"
        loop = asyncio.get_running_loop()
        if how == "aclose":
            loop.call_soon(gate.set)  # runs only once the stream is already closing
            await stream.aclose()
        else:  # what Django's ASGI handler does when the client disconnects
            reader = asyncio.ensure_future(stream.__anext__())
            await asyncio.sleep(0)
            reader.cancel()
            loop.call_soon(gate.set)
            with pytest.raises(asyncio.CancelledError):
                await reader
        return list(finished)

    assert asgi(go) == [True]
