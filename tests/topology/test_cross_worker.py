"""Two worker processes, one database: the client's answer to a form elicitation reaches the
process that is *not* running the tool, and the tool still gets it.

Server A is the live ASGI server of the test process; server B is a separate uvicorn process
of the same project on the same database (no sticky sessions: MCP 2025-11-25 "Streamable
HTTP" lets any request of a session land on any worker). The tool runs on A and sends
``elicitation/create`` on A's stream; the answer is POSTed to B, which has no waiter for it,
stores it on the elicitation row (``client_response_received``), and A's tool picks it up.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx2
import pytest

from elicitation.models import Elicitation
from mcp_oauth.models import McpSession
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port, run_asgi_server
from tests.support.topology import database_url, start_uvicorn

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
CAPABILITIES = {"elicitation": {"form": {}}}


def _start_worker(port: int, base_url: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MCP_BASE_URL": base_url,
        "DJANGO_DEBUG": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("CELERY_BROKER_URL", None)
    return start_uvicorn(port, env)


def _sse_messages(lines):
    """JSON-RPC messages of an SSE line iterator (``data:`` lines)."""
    for line in lines:
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload:
                yield json.loads(payload)


def test_form_answer_posted_to_another_worker_reaches_the_tool(settings, user, public_app, mint_token):
    port_a, port_b = free_port(), free_port()
    base = f"http://127.0.0.1:{port_a}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base, "SSE_POLL_INTERVAL_SECONDS": 0.1}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    worker_b = _start_worker(port_b, base)
    try:
        from project.asgi import application

        with run_asgi_server(application, port_a), httpx2.Client(timeout=20) as http:
            init = http.post(
                f"{base}/mcp",
                headers=headers,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": CAPABILITIES,
                        "clientInfo": {"name": "two-workers", "version": "1"},
                    },
                },
            )
            assert init.status_code == 200, init.text
            session_headers = {
                **headers,
                "Mcp-Session-Id": init.headers["Mcp-Session-Id"],
                "MCP-Protocol-Version": "2025-11-25",
            }
            assert (
                http.post(
                    f"{base}/mcp",
                    headers=session_headers,
                    json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                ).status_code
                == 202
            )

            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
            seen = []
            with http.stream("POST", f"{base}/mcp", headers=session_headers, json=call) as stream:
                assert stream.status_code == 200
                assert stream.headers["content-type"].startswith("text/event-stream")
                for message in _sse_messages(stream.iter_lines()):
                    seen.append(message)
                    if message.get("method") == "elicitation/create":
                        answer = {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "result": {"action": "accept", "content": {"name": "Grace", "age": 85}},
                        }
                        # to the OTHER worker: nobody waits for it there
                        posted = httpx2.post(
                            f"http://127.0.0.1:{port_b}/mcp", headers=session_headers, json=answer, timeout=10
                        )
                        assert posted.status_code == 202, posted.text
                    elif message.get("id") == 2:
                        break
    finally:
        worker_b.terminate()
        try:
            worker_b.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker_b.kill()

    request = next(m for m in seen if m.get("method") == "elicitation/create")
    assert request["id"].startswith("elicitation-")
    final = seen[-1]
    assert final["id"] == 2 and "result" in final, final
    assert final["result"]["isError"] is False
    assert final["result"]["content"][0]["text"] == "Hello, Grace! You are 85."
    row = Elicitation.objects.get()
    assert request["id"] == f"elicitation-{row.elicitation_id}"
    assert row.status == "accepted" and row.content == {"name": "Grace", "age": 85}
    assert row.client_answer is None  # read once, then cleared


def test_2026_retry_with_request_state_served_by_another_worker(settings, user, public_app, mint_token):
    """MCP 2026-07-28: the first tools/call (input_required + sealed requestState) is served by
    worker A, the retry by worker B: the state opens there (keys shared through SECRET_KEY) and
    the tool finishes; a replay of the same state on A is refused (single use, shared cache)."""
    port_a, port_b = free_port(), free_port()
    base = f"http://127.0.0.1:{port_a}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    resource = ensure_default_resource()
    token = mint_token(user, public_app, "mcp", resource.uri)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "ask_name",
    }
    worker_b = _start_worker(port_b, base)
    try:
        from project.asgi import application

        with run_asgi_server(application, port_a), httpx2.Client(timeout=20) as http:
            first = http.post(
                f"{base}/mcp",
                headers=headers,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "ask_name", "arguments": {}, "_meta": meta},
                },
            )
            assert first.status_code == 200, first.text
            state = first.json()["result"]["requestState"]
            retry = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "ask_name",
                    "arguments": {},
                    "_meta": meta,
                    "requestState": state,
                    "inputResponses": {"input-1": {"action": "accept", "content": {"name": "Grace", "age": 85}}},
                },
            }
            second = http.post(f"http://127.0.0.1:{port_b}/mcp", headers=headers, json=retry)
            replay = http.post(f"{base}/mcp", headers=headers, json={**retry, "id": 3})
    finally:
        worker_b.terminate()
        try:
            worker_b.wait(timeout=10)
        except subprocess.TimeoutExpired:
            worker_b.kill()

    assert first.json()["result"]["resultType"] == "input_required"
    assert list(first.json()["result"]["inputRequests"]) == ["input-1"]
    assert second.status_code == 200, second.text
    result = second.json()["result"]
    assert result["resultType"] == "complete" and result["content"][0]["text"] == "Hello, Grace! You are 85."
    row = Elicitation.objects.get()
    assert (row.status, row.content, row.session_id) == ("accepted", {"name": "Grace", "age": 85}, None)
    assert not McpSession.objects.exists()
    # single use across workers: A's cache never saw the state (per-process caches here), but the
    # form row it names left "pending" on B, so A refuses the replay.
    assert replay.status_code == 400, replay.text
    assert replay.json()["error"]["code"] == -32602
    assert Elicitation.objects.filter(status="accepted").count() == 1
