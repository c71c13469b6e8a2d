"""Graceful shutdown (mcp_oauth.mcp_server.transport.drain): what a worker does with its open streams on SIGTERM.

Real worker processes (uvicorn as ``make run`` serves, gunicorn + uvicorn workers as
``make serve``) on the test's PostgreSQL database and Redis (wake-ups, cache), no sticky
sessions:

* a 2025-11-25 GET stream ends with ``retry: 500``; the client resumes it on another worker with
  ``Last-Event-ID`` and receives what was written meanwhile, nothing twice, nothing lost;
* a 2026-07-28 ``subscriptions/listen`` stream ends with ``retry: 500`` after its acknowledgement;
* a ``tools/call`` waiting for an elicitation answer is not cut: the answer POSTed to another
  worker reaches the tool through the wake-up channel and its result comes on the draining
  worker's stream; the worker then exits 0;
* with ``DRAIN_DELAY_SECONDS`` the worker keeps serving while readiness answers 503 ``draining``,
  a second SIGTERM (a group stop relayed by gunicorn's master) changes nothing, SIGINT ends the delay;
* gunicorn's rolling restart (``kill -HUP`` of the master): the stream's old worker exits, the
  new one serves the same session from where the client stopped; so it does for the official
  ``mcp`` SDK client, which reconnects its GET stream after the ``retry`` time;
* a GET stream served through Django's handler (no lean lane) ends the same way.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import threading
import time

import httpx2
import pytest
from asgiref.sync import async_to_sync, sync_to_async
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceUpdatedNotification

from mcp_oauth.mcp_server.transport import drain
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.mcp_server.transport.sse import outbox_stream
from mcp_oauth.mcp_server.transport.wakeup import released
from mcp_oauth.models import McpSession
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.topology import REDIS_URL, require_postgres_and_redis
from tests.support.workers import gunicorn_server, stopped_gracefully, uvicorn_worker, wait_for, worker_env, worker_pids

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MODERN = "2026-07-28"


@pytest.fixture
def site(settings, user, public_app, mint_token):
    """(base URL of worker A, a port for worker B, the environment of both, a bearer token);
    this process publishes its wake-ups through the workers' Redis."""
    require_postgres_and_redis()
    port_a = free_port()
    base = f"http://127.0.0.1:{port_a}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base, "WAKEUP_URL": REDIS_URL}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    env = worker_env(base, "drain-" + secrets.token_hex(4))
    return port_a, free_port(), env, token


def mcp_headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if session:
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    return headers


def open_session(http: httpx2.Client, url: str, token: str, capabilities: dict | None = None) -> str:
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": capabilities or {},
            "clientInfo": {"name": "drain", "version": "1"},
        },
    }
    opened = http.post(url, headers=mcp_headers(token), json=init)
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    done = http.post(
        url, headers=mcp_headers(token, session), json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert done.status_code == 202
    return session


def note(n: int) -> dict:
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": f"row {n}"}}


def read_events(lines, count: int) -> list[tuple[str, dict]]:
    """The next ``count`` SSE events as (id, message)."""
    events: list[tuple[str, dict]] = []
    event_id = ""
    for line in lines:
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            events.append((event_id, json.loads(line[5:])))
            if len(events) == count:
                return events
    raise AssertionError(f"the stream ended after {len(events)} of {count} events")


def rest_of(lines) -> list[str]:
    """The stream's remaining lines to its end. A keepalive comment means the stream stayed open
    (SSE_KEEPALIVE_SECONDS later): an AssertionError, not a wait without end."""
    rest = []
    for line in lines:
        assert not line.startswith(":"), f"the stream stayed open after {rest!r}"
        rest.append(line)
    return rest


def test_get_stream_ends_with_retry_and_resumes_on_another_worker(site):
    port_a, port_b, env, token = site
    url_a, url_b = f"http://127.0.0.1:{port_a}/mcp", f"http://127.0.0.1:{port_b}/mcp"
    with uvicorn_worker(port_a, env) as worker_a, uvicorn_worker(port_b, env), httpx2.Client(timeout=20) as http:
        session = open_session(http, url_a, token)
        with http.stream("GET", url_a, headers=mcp_headers(token, session)) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            enqueue_session_message(session, note(1))
            [(first_id, message)] = read_events(lines, 1)
            assert message == note(1)
            worker_a.send_signal(signal.SIGTERM)
            assert rest_of(lines) == ["", "retry: 500", ""]
        assert stopped_gracefully(worker_a) == (-signal.SIGTERM, [])
        enqueue_session_message(session, note(2))  # while the client is away
        resumed = {**mcp_headers(token, session), "Last-Event-ID": first_id}
        with http.stream("GET", url_b, headers=resumed) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            [(second_id, message)] = read_events(lines, 1)
            assert (message, int(second_id) > int(first_id)) == (note(2), True)


def test_listen_stream_ends_with_retry(site):
    port_a, _, env, token = site
    listen = {
        "jsonrpc": "2.0",
        "id": "listen-1",
        "method": "subscriptions/listen",
        "params": {
            "notifications": {"toolsListChanged": True},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "subscriptions/listen",
    }
    with uvicorn_worker(port_a, env) as worker, httpx2.Client(timeout=20) as http:
        with http.stream("POST", f"http://127.0.0.1:{port_a}/mcp", headers=headers, json=listen) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            [(_, ack)] = read_events(lines, 1)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            worker.send_signal(signal.SIGTERM)
            assert rest_of(lines) == ["", "retry: 500", ""]
        assert stopped_gracefully(worker) == (-signal.SIGTERM, [])


def test_a_tool_waiting_for_an_elicitation_answer_finishes_on_the_draining_worker(site):
    port_a, port_b, env, token = site
    url_a, url_b = f"http://127.0.0.1:{port_a}/mcp", f"http://127.0.0.1:{port_b}/mcp"
    with uvicorn_worker(port_a, env) as worker_a, uvicorn_worker(port_b, env), httpx2.Client(timeout=30) as http:
        session = open_session(http, url_a, token, {"elicitation": {"form": {}}})
        headers = mcp_headers(token, session)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
        with http.stream("POST", url_a, headers=headers, json=call) as stream:
            lines = stream.iter_lines()
            [(_, ask)] = read_events(lines, 1)
            assert ask["method"] == "elicitation/create"
            worker_a.send_signal(signal.SIGTERM)
            answer = {"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
            posted = httpx2.post(url_b, headers=headers, json=answer, timeout=10)  # A accepts no more
            assert posted.status_code == 202
            [(_, result)] = read_events(lines, 1)
            assert result["id"] == 2
            assert result["result"]["content"][0]["text"].startswith("Hello, Ada")
            assert rest_of(lines) == [""]  # the event's end, then the response ended: no retry hint
        assert stopped_gracefully(worker_a) == (-signal.SIGTERM, [])


def test_drain_delay_keeps_serving_while_readiness_is_503(site):
    port_a, _, env, token = site
    base = f"http://127.0.0.1:{port_a}"
    with uvicorn_worker(port_a, {**env, "MCP_DRAIN_DELAY_SECONDS": "120"}) as worker:
        assert httpx2.get(f"{base}/readyz").json()["status"] in ("ready", "unavailable")
        worker.send_signal(signal.SIGTERM)
        assert wait_for(lambda: httpx2.get(f"{base}/readyz").status_code == 503)
        draining = httpx2.get(f"{base}/readyz")
        assert (draining.json(), draining.headers["retry-after"], draining.headers["connection"]) == (
            {"status": "draining"},
            "2",
            "close",
        )
        assert httpx2.get(f"{base}/healthz").json() == {"status": "alive"}
        with httpx2.Client(timeout=10) as http:
            session = open_session(http, f"{base}/mcp", token)  # still served during the delay
            echo = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hi"}},
            }
            answered = http.post(f"{base}/mcp", headers=mcp_headers(token, session), json=echo)
            assert answered.status_code == 200
            assert answered.headers["connection"] == "close"  # clients leave a draining worker
        worker.send_signal(signal.SIGTERM)  # the same stop told again (gunicorn's master relays it)
        time.sleep(0.5)
        assert worker.poll() is None
        assert httpx2.get(f"{base}/readyz").status_code == 503  # still serving: the delay goes on
        worker.send_signal(signal.SIGINT)  # Ctrl-C: the server stops now
        assert stopped_gracefully(worker) == (0, [])  # uvicorn exits 0 after Ctrl-C


def test_gunicorn_rolling_restart_resumes_the_stream_on_the_new_worker(site):
    port_a, _, env, token = site
    url = f"http://127.0.0.1:{port_a}/mcp"
    with gunicorn_server(port_a, env) as master, httpx2.Client(timeout=30) as http:
        [old] = worker_pids(master)
        session = open_session(http, url, token)
        with http.stream("GET", url, headers=mcp_headers(token, session)) as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            enqueue_session_message(session, note(1))
            [(first_id, _)] = read_events(lines, 1)
            os.kill(master.pid, signal.SIGHUP)
            assert rest_of(lines) == ["", "retry: 500", ""]
        assert wait_for(lambda: old not in worker_pids(master) and len(worker_pids(master)) == 1, timeout=60)
        writer = threading.Timer(0.5, enqueue_session_message, (session, note(2)))
        resumed = {**mcp_headers(token, session), "Last-Event-ID": first_id}
        with http.stream("GET", url, headers=resumed) as stream:
            assert stream.status_code == 200
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            writer.start()
            [(_, message)] = read_events(lines, 1)
            assert message == note(2)
        writer.join()


def test_get_stream_under_djangos_handler_ends_with_retry(user, public_app):
    """A site without the lean lane serves GET streams through Django's handler
    (:func:`~mcp_oauth.mcp_server.transport.sse.outbox_stream`): the same retry hint when the worker drains."""
    session = McpSession.objects.create(
        user=user,
        application=public_app,
        resource=ensure_default_resource(),
        protocol_version="2025-11-25",
        client_capabilities={},
    )

    async def run() -> list[bytes]:
        stream = outbox_stream(session.pk, 0, poll_seconds=30, keepalive_seconds=30)
        seen = [await anext(stream)]
        following = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0.3)  # the stream read the outbox (empty) and waits for a wake-up
        seen.append(b"waiting" if not following.done() else b"not waiting")
        drain.begin()  # wakes every waiter of the hub: pushed, the 30 s poll is not what ends it
        seen.append(await asyncio.wait_for(following, 10))
        seen.extend([chunk async for chunk in stream])
        return seen

    try:
        assert async_to_sync(run)() == [b": stream open\n\n", b"waiting", b"retry: 500\n\n"]
    finally:
        drain.reset()


def test_official_sdk_client_keeps_its_session_and_stream_through_a_rolling_restart(site):
    """The ``mcp`` SDK client (legacy mode: a session and its GET stream) on gunicorn; a rolling
    restart replaces the worker; the client reconnects its GET stream after the ``retry`` time
    with ``Last-Event-ID``, gets the event written meanwhile, and its session works on the new
    worker."""
    port, _, env, token = site
    received: list[str] = []
    arrived = asyncio.Event()

    async def on_message(message) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            received.append(str(message.params.uri))
            arrived.set()

    async def until(count: int) -> None:
        while len(received) < count:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), 20)

    def updated(n: int) -> dict:
        return {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": f"note://{n}"}}

    # on a thread of its own whose database connection is closed after each call (else it would
    # keep the test database open at teardown)
    enqueue = sync_to_async(released(enqueue_session_message), thread_sensitive=False)
    only_session = sync_to_async(released(lambda: McpSession.objects.get().pk), thread_sensitive=False)

    async def run(master) -> tuple[list[str], str]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(
                streamable_http_client(url, http_client=http), mode="legacy", message_handler=on_message
            ) as client:
                session = await only_session()
                await asyncio.sleep(0.5)  # the client opens its GET stream after initialize
                await enqueue(session, updated(1))
                await until(1)
                [old] = worker_pids(master)
                os.kill(master.pid, signal.SIGHUP)
                replaced = await asyncio.to_thread(
                    wait_for, lambda: old not in worker_pids(master) and len(worker_pids(master)) == 1, 60
                )
                assert replaced
                await enqueue(session, updated(2))
                await until(2)
                echoed = await client.call_tool("echo", {"text": "after the restart"})
                return received, echoed.content[0].text

    with gunicorn_server(port, env) as master:
        assert asyncio.run(run(master)) == (["note://1", "note://2"], "after the restart")
