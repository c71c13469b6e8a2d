"""The lean ASGI lane (mcp_oauth.mcp_server.transport.asgi): the MCP endpoint served before Django's
middleware stack with the same view, every other path by Django unchanged."""

from __future__ import annotations

import asyncio
import collections
import contextvars
import io
import json
import threading

import pytest
from asgiref import sync as asgiref_sync
from asgiref.sync import async_to_sync
from django.core.handlers.asgi import ASGIRequest
from django.core.signals import request_finished
from django.db.backends.base.base import BaseDatabaseWrapper
from django.http.request import HttpHeaders

from mcp_oauth.mcp_server.tools import ToolRegistry
from mcp_oauth.mcp_server.transport.asgi import McpLane, ScopeHeaders
from mcp_oauth.mcp_server.transport.views import McpView
from mcp_oauth.models import ProtectedResource
from tests.support.asgi_client import asgi_call, http_scope

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def lane():
    from django.core.asgi import get_asgi_application

    return McpLane(get_asgi_application())


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


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


@pytest.fixture
def finished_receivers():
    """Sync, async and sender-specific request_finished receivers, and the connections that
    Django's close_old_connections checked (what it does on the thread that holds them)."""
    seen: collections.Counter = collections.Counter()

    def on_any(sender, **kwargs):
        seen["sync", sender] += 1

    async def on_any_async(sender, **kwargs):
        seen["async", sender] += 1

    def on_other(sender, **kwargs):
        seen["other", sender] += 1

    original = BaseDatabaseWrapper.close_if_unusable_or_obsolete

    def checked(self):
        seen["db-check"] += 1
        return original(self)

    request_finished.connect(on_any)
    request_finished.connect(on_any_async)
    request_finished.connect(on_other, sender=object)
    BaseDatabaseWrapper.close_if_unusable_or_obsolete = checked
    try:
        yield seen
    finally:
        BaseDatabaseWrapper.close_if_unusable_or_obsolete = original
        request_finished.disconnect(on_any)
        request_finished.disconnect(on_any_async)
        request_finished.disconnect(on_other, sender=object)


def test_a_no_hop_call_runs_the_sites_request_finished_receivers_but_not_the_thread_cleanup(
    lane, token, finished_receivers
):
    status, headers, _ = asgi_call(lane, "POST", "/mcp", mcp(token), INIT)
    session = headers["mcp-session-id"]
    asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)  # warm caches
    finished_receivers.clear()
    status, _, _ = asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)
    assert status == 200
    # the site's receivers ran once each (the one bound to another sender not at all); Django's
    # close_old_connections did not: no connection was opened on the event loop
    assert finished_receivers == collections.Counter({("sync", McpLane): 1, ("async", McpLane): 1})


def test_a_sync_tools_call_still_gives_its_connection_back(token, finished_receivers):
    """A sync tool that queries the database runs on the request's thread (a hop): request_finished
    runs there in full, and close_old_connections checks the connection that thread opened."""
    registry = ToolRegistry("lane-sync")

    def count_resources() -> str:
        return str(ProtectedResource.objects.count())

    registry.register(count_resources)
    lane = McpLane(None, view=McpView.as_view(registry=registry))
    body = _modern_call("count_resources")
    status, _, raw = asgi_call(lane, "POST", "/mcp", _modern_headers(token, "count_resources", body), body)
    assert status == 200, raw
    assert json.loads(raw)["result"]["content"][0]["text"].isdigit()
    assert finished_receivers["db-check"] >= 1, finished_receivers
    assert finished_receivers["sync", McpLane] == 1 and finished_receivers["async", McpLane] == 1, finished_receivers
    assert finished_receivers["other", McpLane] == 0


def test_the_loop_receivers_follow_connects_and_disconnects(lane, token):
    status, headers, _ = asgi_call(lane, "POST", "/mcp", mcp(token), INIT)
    session = headers["mcp-session-id"]
    asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)  # warm caches; the filtered list is computed
    calls: list[str] = []

    def late(sender, **kwargs):
        calls.append("late")

    request_finished.connect(late)
    try:
        asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)
    finally:
        request_finished.disconnect(late)
    asgi_call(lane, "POST", "/mcp", mcp(token, session), CALL)
    assert calls == ["late"]


def test_a_cold_call_hops_to_one_pooled_thread_and_returns_it(lane, token, monkeypatch):
    from mcp_oauth.mcp_server.transport import asgi as lane_module

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


# --- GET: the session stream served on ASGI messages (mcp_oauth.mcp_server.transport.stream_lane) ----------


@pytest.fixture
def session(resource, user, public_app):
    from mcp_oauth.models import McpSession

    return McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25"
    )


# --- call_on_request_thread: the token lane's one hop ------------------------------------------

_request_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_var", default="unset")


def test_one_hop_runs_the_call_on_a_pooled_thread_with_the_callers_context():
    from mcp_oauth.mcp_server.transport import asgi as lane_module

    idle = len(lane_module._threads._idle)

    def work(number: int) -> tuple:
        seen = _request_var.get()
        _request_var.set("changed on the thread")
        return number * 2, seen, threading.current_thread().name

    async def caller() -> tuple:
        _request_var.set("the caller's")
        result = await lane_module.call_on_request_thread(work, 21)
        return result, _request_var.get(), threading.current_thread().name

    (doubled, seen, thread), after, loop_thread = asyncio.run(caller())
    assert (doubled, seen, after) == (42, "the caller's", "the caller's")  # nothing leaks back
    assert thread.startswith("mcp-request") and thread != loop_thread
    assert len(lane_module._threads._idle) == max(idle, 1)  # the thread went back to the pool


def test_one_hop_hands_the_calls_exception_to_the_caller():
    from mcp_oauth.mcp_server.transport.asgi import call_on_request_thread

    def failing() -> None:
        raise LookupError("from the thread")

    async def caller() -> None:
        await call_on_request_thread(failing)

    with pytest.raises(LookupError, match="from the thread"):
        asyncio.run(caller())


def test_a_caller_that_leaves_does_not_interrupt_the_call_and_the_thread_comes_back():
    from mcp_oauth.mcp_server.transport import asgi as lane_module

    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        assert release.wait(timeout=10)
        finished.set()
        return "done"

    async def caller() -> None:
        task = asyncio.create_task(lane_module.call_on_request_thread(slow))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()  # a client that left
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        for _ in range(500):
            if finished.is_set():
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the result is handed to a cancelled future: dropped quietly

    idle = len(lane_module._threads._idle)
    asyncio.run(caller())
    assert finished.is_set()
    assert len(lane_module._threads._idle) == max(idle, 1)


def test_one_hop_calls_beyond_the_cap_wait_without_a_thread(monkeypatch):
    from mcp_oauth.shared import lanes as lane_module

    monkeypatch.setattr(lane_module, "CALL_THREADS", 2)
    monkeypatch.setattr(lane_module, "_call_slots", lane_module.weakref.WeakKeyDictionary())
    release = threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    def held(number: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        assert release.wait(timeout=10)
        with lock:
            running[0] -= 1
        return number

    async def caller() -> list[int]:
        calls = [asyncio.create_task(lane_module.call_on_request_thread(held, n)) for n in range(6)]
        for _ in range(100):  # let every call reach its slot or its wait
            await asyncio.sleep(0.01)
        assert running[0] == 2  # the other four wait on the loop
        release.set()
        return await asyncio.gather(*calls)

    assert asyncio.run(caller()) == list(range(6))
    assert most[0] == 2


def _modern_call(name: str) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": name, "arguments": {}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode()


def _modern_headers(token, name: str, body: bytes) -> dict:
    return {
        **mcp(token),
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": name,
        "content-length": str(len(body)),
    }


def _waiting_tool_view(seen: dict):
    from mcp_oauth.mcp_server.tools import ToolRegistry
    from mcp_oauth.mcp_server.transport.views import McpView

    registry = ToolRegistry("lane-leave")

    async def wait_forever() -> str:
        seen["running"].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise
        return "never"

    registry.register(wait_forever)
    return McpView.as_view(registry=registry)


def test_a_modern_caller_that_leaves_cancels_the_tool_and_the_lane_finishes_the_request(token):
    """2026-07-28: closing the response is cancellation. The lane answers in the request's own
    task and starts listening for the disconnect only once the response takes a while: a client
    that left is still noticed, the tool is cancelled, nothing is sent, request_finished fires."""
    from django.core.signals import request_finished

    seen: dict = {}
    lane = McpLane(None, view=_waiting_tool_view(seen))
    body = _modern_call("wait_forever")
    sent: list[dict] = []
    finished: list[object] = []

    def on_finished(sender, **kwargs):
        finished.append(sender)

    async def run():
        seen["running"] = asyncio.Event()
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop(0)
            await seen["running"].wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = http_scope("POST", "/mcp", _modern_headers(token, "wait_forever", body))
        await lane(scope, receive, send)
        return asyncio.current_task().cancelling()

    request_finished.connect(on_finished)
    try:
        cancelling = async_to_sync(run)()
    finally:
        request_finished.disconnect(on_finished)
    assert seen == {"running": seen["running"], "cancelled": True}
    assert sent == []
    assert finished == [McpLane]
    assert cancelling == 0  # the lane's own cancellation does not leak into the server's task


def test_a_lane_request_cancelled_from_outside_stays_cancelled(token):
    """Server shutdown cancels the request's task: the lane does not take that for a client
    that left, the cancellation propagates and the tool is cancelled with it."""
    seen: dict = {}
    lane = McpLane(None, view=_waiting_tool_view(seen))
    body = _modern_call("wait_forever")

    async def run():
        seen["running"] = asyncio.Event()
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop(0)
            await asyncio.Event().wait()  # the client stays
            return {"type": "http.disconnect"}

        async def send(message):
            pass

        scope = http_scope("POST", "/mcp", _modern_headers(token, "wait_forever", body))
        task = asyncio.ensure_future(lane(scope, receive, send))
        await seen["running"].wait()
        await asyncio.sleep(0.1)  # past the lane's disconnect-watch delay: its listener is running
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"
        return "finished"

    assert async_to_sync(run)() == "cancelled"
    assert seen["cancelled"] is True


def test_scope_headers_are_the_request_headers_django_builds():
    """The lane's request.headers (from the scope) has the names, values, order and lookups of
    HttpHeaders(request.META): underscore names dropped, repeated fields joined, latin-1."""
    raw = [
        (b"host", b"testserver"),
        (b"content-type", b"application/json"),
        (b"content-length", b"2"),
        (b"accept", b"application/json"),
        (b"x_spoofed", b"1"),
        (b"mcp-param-region", b"eu"),
        (b"accept", b"text/event-stream"),
        (b"x-b3-traceid", "caf\xe9".encode("latin1")),
    ]
    scope = http_scope("POST", "/mcp", {})
    scope["headers"] = raw
    django_headers = HttpHeaders(ASGIRequest(scope, io.BytesIO(b"{}")).META)
    ours = ScopeHeaders(raw)
    assert list(ours.items()) == list(django_headers.items())
    assert ours["MCP_PARAM_REGION"] == ours["mcp-param-region"] == "eu"
    assert ours.get("Accept") == "application/json,text/event-stream"
    assert "X-Spoofed" not in ours and "x_spoofed" not in ours
