"""The session GET stream served on ASGI messages (mcp_oauth.mcp_server.transport.stream_lane): the outbox then new rows, resumption, the end of a deleted session, an idle stream that holds no task, the view's refusals."""

from __future__ import annotations

import asyncio
import collections
import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async

from tests.mcp_oauth.mcp_server.transport.test_asgi import ACCEPT, lane, mcp, session, token  # noqa: F401 - fixtures
from tests.support.asgi_client import asgi_call, http_scope

pytestmark = pytest.mark.django_db(transaction=True)


NOTE = {"method": "notifications/message", "params": {"level": "info", "data": "hi"}}


def stream_headers(token, session_id, **extra):
    return {
        "authorization": f"Bearer {token}",
        "accept": "text/event-stream",
        "mcp-session-id": session_id,
        "mcp-protocol-version": "2025-11-25",
        **{key.lower(): value for key, value in extra.items()},
    }


class OpenStream:
    """A GET through an ASGI app that stays open until :meth:`leave` (the client disconnects)."""

    def __init__(self, app, headers: dict[str, str]) -> None:
        self.app, self.headers = app, headers
        self.sent: asyncio.Queue = asyncio.Queue()
        self.gone = asyncio.Event()
        self.task: asyncio.Task | None = None

    async def __aenter__(self) -> OpenStream:
        request = [{"type": "http.request", "body": b"", "more_body": False}]

        async def receive():
            if request:
                return request.pop()
            await self.gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            await self.sent.put(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.gone.set()  # ASGI: receive() gives http.disconnect once the response is complete

        scope = http_scope("GET", "/mcp", self.headers)
        self.task = asyncio.ensure_future(self.app(scope, receive, send))
        return self

    async def start(self) -> tuple[int, dict[str, str]]:
        message = await asyncio.wait_for(self.sent.get(), 10)
        assert message["type"] == "http.response.start"
        return message["status"], {k.decode().lower(): v.decode() for k, v in message["headers"]}

    async def body(self, timeout: float = 10) -> dict:
        message = await asyncio.wait_for(self.sent.get(), timeout)
        assert message["type"] == "http.response.body"
        return message

    async def events(self, count: int) -> list[dict]:
        """The next ``count`` SSE events (``{"id", "data"}``), skipping comments."""
        found: list[dict] = []
        while len(found) < count:
            chunk = (await self.body())["body"].decode()
            for block in chunk.split("\n\n"):
                fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
                if "data" in fields:
                    found.append({"id": fields.get("id"), "data": json.loads(fields["data"])})
        return found

    async def leave(self) -> None:
        self.gone.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 10)

    async def __aexit__(self, *exc) -> None:
        await self.leave()


def test_get_stream_through_the_lane_sends_the_outbox_then_new_rows(lane, token, session):
    from asgiref.sync import sync_to_async

    from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
    from mcp_oauth.mcp_server.transport.wakeup import hub, session_topic

    first = enqueue_session_message(session.pk, {"method": "notifications/first"})

    async def run():
        async with OpenStream(lane, stream_headers(token, session.pk)) as stream:
            status, headers = await stream.start()
            opening = await stream.body()
            before = await stream.events(1)
            assert session_topic(session.pk) in hub.waiting_topics()
            second = await sync_to_async(enqueue_session_message)(session.pk, NOTE)
            after = await stream.events(1)
        return status, headers, opening, before, second, after

    status, headers, opening, before, second, after = async_to_sync(run)()
    assert status == 200
    assert headers["content-type"] == "text/event-stream"
    assert headers["cache-control"] == "no-cache, no-transform"
    assert headers["x-accel-buffering"] == "no"
    assert headers["x-content-type-options"] == "nosniff"
    assert opening == {"type": "http.response.body", "body": b": stream open\n\n", "more_body": True}
    assert before == [{"id": str(first.pk), "data": {"jsonrpc": "2.0", "method": "notifications/first"}}]
    assert after == [{"id": str(second.pk), "data": {"jsonrpc": "2.0", **NOTE}}]
    assert session_topic(session.pk) not in hub.waiting_topics()  # the client left: nothing stays


def test_get_stream_through_the_lane_resumes_after_last_event_id(lane, token, session):
    from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message

    rows = [enqueue_session_message(session.pk, {"method": f"notifications/n{i}"}) for i in range(4)]

    async def run():
        headers = stream_headers(token, session.pk, **{"Last-Event-ID": str(rows[1].pk)})
        async with OpenStream(lane, headers) as stream:
            await stream.start()
            await stream.body()  # ": stream open"
            return await stream.events(2)

    events = async_to_sync(run)()
    assert [event["id"] for event in events] == [str(rows[2].pk), str(rows[3].pk)]
    assert [event["data"]["method"] for event in events] == ["notifications/n2", "notifications/n3"]


def test_get_stream_through_the_lane_ends_when_the_session_is_deleted(lane, token, session):
    async def run():
        async with OpenStream(lane, stream_headers(token, session.pk)) as stream:
            await stream.start()
            await stream.body()
            await asyncio.sleep(0.3)  # the first read is done: the stream waits
            deleted = await asyncio.get_running_loop().run_in_executor(
                None, lambda: asgi_call(lane, "DELETE", "/mcp", mcp(token, session.pk))
            )
            last = await stream.body()
            await asyncio.wait_for(stream.task, 10)  # the response ended by itself
            return deleted[0], last

    status, last = async_to_sync(run)()
    assert status == 204
    assert last == {"type": "http.response.body", "body": b"", "more_body": False}


def test_an_idle_lane_stream_keeps_no_task_and_reads_nothing(lane, token, session, settings, monkeypatch):
    """Between events a stream is its request's coroutine and a small state object: no task of
    its own, no outbox read (pushed wake-ups), only a ``: keepalive`` now and then."""
    from mcp_oauth.mcp_server.transport import stream_lane

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SSE_KEEPALIVE_SECONDS": 0.3}
    monkeypatch.setattr(stream_lane.wakeup.WakeupHub, "shared", property(lambda self: True))
    monkeypatch.setattr(stream_lane.wakeup.WakeupHub, "_ensure_listener", lambda self, loop: None)
    reads = collections.Counter()
    original = stream_lane.read_outbox_released

    async def counting(*args):
        reads["outbox"] += 1
        return await original(*args)

    monkeypatch.setattr(stream_lane, "read_outbox_released", counting)

    async def run():
        tasks_before = len(asyncio.all_tasks())
        async with OpenStream(lane, stream_headers(token, session.pk)) as stream:
            await stream.start()
            await stream.body()
            await asyncio.sleep(0.2)  # the first read
            assert len(asyncio.all_tasks()) == tasks_before + 1  # the request itself only
            first = reads["outbox"]
            keepalives = [await stream.body(2), await stream.body(2)]
            assert len(asyncio.all_tasks()) == tasks_before + 1
            return first, reads["outbox"], keepalives

    first, later, keepalives = async_to_sync(run)()
    assert first == later == 1
    assert [message["body"] for message in keepalives] == [b": keepalive\n\n"] * 2


def test_a_lane_stream_whose_session_ended_without_a_wake_up_ends_at_its_next_touch(
    lane, token, session, settings, monkeypatch
):
    """The session ended where no wake-up reached this process (the publish was lost, another
    process ended it without one): the stream ends at its next touch instead of living on."""
    from django.utils import timezone

    from mcp_oauth.mcp_server.transport import stream_lane
    from mcp_oauth.models import McpSession

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SSE_KEEPALIVE_SECONDS": 0.3, "SESSION_IDLE_TIMEOUT_SECONDS": 1}
    monkeypatch.setattr(stream_lane.wakeup.WakeupHub, "shared", property(lambda self: True))
    monkeypatch.setattr(stream_lane.wakeup.WakeupHub, "_ensure_listener", lambda self, loop: None)

    async def run():
        async with OpenStream(lane, stream_headers(token, session.pk)) as stream:
            await stream.start()
            await stream.body()  # ": stream open"
            await asyncio.sleep(0.2)  # the first read is done: the stream waits
            ended = await sync_to_async(McpSession.objects.filter(pk=session.pk).update)(ended_at=timezone.now())
            bodies = []
            while (not bodies or bodies[-1]["more_body"]) and len(bodies) < 20:  # 6 s of keepalives at most
                bodies.append(await stream.body(5))
            await asyncio.wait_for(stream.task, 5)
            return ended, bodies

    ended, bodies = async_to_sync(run)()
    assert ended == 1
    assert bodies[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert {message["body"] for message in bodies[:-1]} <= {b": keepalive\n\n"}


def _get_headers(token, session_id):
    return {
        "no token": {"accept": "text/event-stream"},
        "no event-stream in Accept": stream_headers(token, session_id, Accept="application/json"),
        "2026-07-28": stream_headers(token, session_id, **{"MCP-Protocol-Version": "2026-07-28"}),
        "unsupported version": stream_headers(token, session_id, **{"MCP-Protocol-Version": "1999-01-01"}),
        "unknown session": stream_headers(token, "no-such-session"),
        "no session": {k: v for k, v in stream_headers(token, session_id).items() if k != "mcp-session-id"},
        "request stream id as Last-Event-ID": stream_headers(token, session_id, **{"Last-Event-ID": "r1a2b3-4"}),
        "foreign Origin": stream_headers(token, session_id, Origin="https://evil.example"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "no token",
        "no event-stream in Accept",
        "2026-07-28",
        "unsupported version",
        "unknown session",
        "no session",
        "request stream id as Last-Event-ID",
        "foreign Origin",
    ],
)
def test_get_refusals_through_the_lane_are_the_views(lane, token, session, case):
    """Every check of the GET path answers through the lane exactly as through Django's handler."""
    from django.core.asgi import get_asgi_application

    headers = _get_headers(token, session.pk)[case]
    through_lane = asgi_call(lane, "GET", "/mcp", headers)
    through_django = asgi_call(get_asgi_application(), "GET", "/mcp", headers)
    assert through_lane[0] == through_django[0] and through_lane[0] >= 400
    assert through_lane[2] == through_django[2]
    for name in ("content-type", "www-authenticate", "allow"):
        assert through_lane[1].get(name) == through_django[1].get(name)
