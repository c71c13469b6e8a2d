"""Push wake-ups (mcp_oauth.mcp_server.transport.wakeup) and the GET stream that sleeps on them.

* In one process: an outbox row wakes the waiting stream when its transaction commits; an idle
  stream issues no query and holds no connection; a wake-up that never came (rows written
  without signals) is recovered by the per-process safety poll.
* Through Redis (DB 6) and PostgreSQL LISTEN/NOTIFY: a publish reaches a subscriber.
* Across processes: a uvicorn worker whose polling interval is 30 s delivers a row written by
  this process at once (tests/topology/test_production_topology.py has the PostgreSQL side).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time

import httpx2
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection

from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.mcp_server.transport.sse import outbox_stream
from mcp_oauth.mcp_server.transport.wakeup import WakeupHub, hub
from mcp_oauth.models import McpSession, McpSessionEvent
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.topology import REDIS_URL, asgi_worker

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = {"method": "notifications/message", "params": {"level": "info", "data": "hi"}}


def redis_or_skip() -> None:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"no Redis at {REDIS_URL}: {exc}")


@pytest.fixture
def session(resource, user, public_app):
    return McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25"
    )


def test_subscription_keeps_a_wake_up_that_arrived_before_the_wait():
    async def run():
        with hub.subscribe("session:x") as subscription:
            assert hub.wake_local("session:x") == 1
            assert await subscription.wait(5) is True  # at once
            assert await subscription.wait(0.05) is False  # consumed
        assert hub.wake_local("session:x") == 0  # closed subscriptions are gone

    async_to_sync(run)()


def test_an_outbox_row_wakes_the_stream_when_it_commits(session, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SSE_POLL_INTERVAL_SECONDS": 30}

    async def run():
        stream = outbox_stream(session.pk, 0, poll_seconds=30, keepalive_seconds=30)
        assert await stream.__anext__() == b": stream open\n\n"
        pending = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.2)
        assert not pending.done()
        started = time.monotonic()
        row = await sync_to_async(enqueue_session_message)(session.pk, NOTE)
        event = await asyncio.wait_for(pending, 5)
        await stream.aclose()
        return event, row, time.monotonic() - started

    event, row, elapsed = async_to_sync(run)()
    assert event.startswith(f"id: {row.pk}\n".encode())
    assert elapsed < 2  # not the 30 s poll


@pytest.mark.parametrize("wakeup_url", ["redis", None])
def test_an_idle_stream_issues_no_query_and_holds_no_connection(session, settings, wakeup_url):
    if wakeup_url == "redis":
        redis_or_skip()
        wakeup_url = REDIS_URL
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "WAKEUP_URL": wakeup_url, "WAKEUP_SAFETY_POLL_SECONDS": 60}

    async def run():
        stream = outbox_stream(session.pk, 0, poll_seconds=0.05, keepalive_seconds=0.3)
        assert await stream.__anext__() == b": stream open\n\n"
        pending = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.2)  # the first read happened; now idle
        before = await sync_to_async(_start_counting)()
        keepalive = await asyncio.wait_for(pending, 5)
        assert keepalive == b": keepalive\n\n"
        assert await sync_to_async(lambda: connection.connection)() is None  # given back after the read
        nxt = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0.5)
        idle = await sync_to_async(_stop_counting)(before)
        await sync_to_async(enqueue_session_message)(session.pk, NOTE)
        while True:  # keepalives may come first
            event = await asyncio.wait_for(nxt, 5)
            if event.startswith(b"id:"):
                break
            nxt = asyncio.ensure_future(stream.__anext__())
        await stream.aclose()
        return idle, event

    queries, event = async_to_sync(run)()
    if settings.MCP_OAUTH["WAKEUP_URL"]:
        assert queries == 0  # pushed: nothing read while idle
    else:
        assert queries >= 10  # the embedded default without a shared channel polls (0.05 s)
    assert b"notifications/message" in event


def _start_counting() -> int:
    connection.force_debug_cursor = True
    return len(connection.queries_log)


def _stop_counting(before: int) -> int:
    connection.force_debug_cursor = False
    return len(connection.queries_log) - before


def test_a_missed_wake_up_is_recovered_by_the_safety_poll(session, settings):
    redis_or_skip()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "WAKEUP_URL": REDIS_URL, "WAKEUP_SAFETY_POLL_SECONDS": 0.3}

    async def run():
        stream = outbox_stream(session.pk, 0, poll_seconds=30, keepalive_seconds=30)
        assert await stream.__anext__() == b": stream open\n\n"
        pending = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(1.0)  # the safety poll learned the newest id
        # bulk_create sends no post_save: nobody publishes a wake-up for this row
        await sync_to_async(McpSessionEvent.objects.bulk_create)(
            [McpSessionEvent(session_id=session.pk, message={"jsonrpc": "2.0", **NOTE})]
        )
        started = time.monotonic()
        event = await asyncio.wait_for(pending, 5)
        await stream.aclose()
        return event, time.monotonic() - started

    event, elapsed = async_to_sync(run)()
    assert b"notifications/message" in event
    assert elapsed < 2


def _publish_reaches_a_subscriber(url: str) -> float:
    receiver = WakeupHub()
    sender = WakeupHub()

    async def run():
        with receiver.subscribe("session:abc") as subscription:
            deadline = time.monotonic() + 5
            while receiver.reconnects == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)  # the listener is connected
            started = time.monotonic()
            threading.Thread(target=sender.publish, args=("session:abc",)).start()
            assert await subscription.wait(5) is True
            return time.monotonic() - started

    return async_to_sync(run)()


def test_redis_pub_sub_reaches_another_hub(settings):
    redis_or_skip()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "WAKEUP_URL": REDIS_URL}
    assert _publish_reaches_a_subscriber(REDIS_URL) < 1


def test_postgres_listen_notify_reaches_another_hub(settings):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL")
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "WAKEUP_URL": "postgres"}
    assert _publish_reaches_a_subscriber("postgres") < 1


def test_a_row_written_here_reaches_the_stream_of_another_process_at_once(settings, user, public_app, mint_token):
    """A uvicorn worker with a 30 s polling interval: only the Redis push can deliver in time."""
    redis_or_skip()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    prefix = "wake-" + secrets.token_hex(4)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base, "WAKEUP_URL": REDIS_URL}
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    session = McpSession.objects.create(
        user=user, application=public_app, resource=resource, protocol_version="2025-11-25"
    )
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "text/event-stream",
        "Mcp-Session-Id": session.pk,
        "MCP-Protocol-Version": "2025-11-25",
    }
    env = {"MCP_WAKEUP_URL": REDIS_URL}
    if connection.vendor != "postgresql":
        pytest.skip("the worker process needs the shared PostgreSQL test database")
    with asgi_worker(port, base, prefix, MCP_SSE_POLL_INTERVAL_SECONDS="30", **env):
        with httpx2.Client(timeout=20) as http, http.stream("GET", f"{base}/mcp", headers=headers) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            time.sleep(0.5)
            started = time.monotonic()
            row = enqueue_session_message(session.pk, NOTE)
            for line in lines:
                if line.startswith("data:"):
                    elapsed = time.monotonic() - started
                    assert json.loads(line[5:]) == {"jsonrpc": "2.0", **NOTE}
                    break
    assert row.pk
    assert elapsed < 1.0
