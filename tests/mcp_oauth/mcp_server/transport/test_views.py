"""The Streamable HTTP MCP endpoint (MCP 2025-11-25 "Transports"), through Django's test clients.

``Client`` exercises the WSGI path (JSON responses only, GET 405); ``AsyncClient``
(driven with ``async_to_sync`` so the ORM stays in the test's transaction)
exercises the ASGI path: SSE for ``tools/call`` and the session's GET stream.
The last tests run the official MCP Python SDK client against uvicorn.
"""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient, Client

from mcp_oauth.mcp_server.tools import McpError, ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.mcp_server.transport.views import McpView
from mcp_oauth.models import McpSession

REGISTRY = ToolRegistry("transport-tests")
ACCEPT_BOTH = "application/json, text/event-stream"
INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"elicitation": {"form": {}}, "roots": {"listChanged": True}},
    "clientInfo": {"name": "test-client", "version": "9.9"},
}


@REGISTRY.tool(title="Add", annotations={"readOnlyHint": True})
def add(a: int, b: int = 0) -> dict:
    """Add two integers."""
    return {"sum": a + b}


@REGISTRY.tool
def crash() -> str:
    raise RuntimeError("internal detail that must not leak")


@REGISTRY.tool
def needs_url() -> str:
    raise McpError(-32042, "URL elicitation required", {"elicitations": []})


@REGISTRY.tool(scopes=["admin"])
def admin_only() -> str:
    return "admin stuff"


@REGISTRY.tool
async def slow_steps(ctx: ToolContext, steps: int = 3) -> str:
    """Report progress, log, then answer."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    await ctx.log("info", {"finished": steps})
    await ctx.log("debug", "noise")
    return f"did {steps} steps"


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.transport.test_views.REGISTRY",
        "SSE_POLL_INTERVAL_SECONDS": 0.01,
    }


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


@pytest.fixture
def client():
    return Client()


def mcp_headers(token: str | None = None, session: str | None = None, **extra: str) -> dict[str, str]:
    headers = {"Accept": ACCEPT_BOTH}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if session:
        headers["Mcp-Session-Id"] = session
    headers.update(extra)
    return headers


def post(client, body, token=None, session=None, *, raw=False, path="/mcp", content_type="application/json", **extra):
    data = body if raw else json.dumps(body)
    return client.post(path, data, content_type=content_type, headers=mcp_headers(token, session, **extra))


def request(method: str, params: dict | None = None, id: int | str = 1) -> dict:
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def initialize(client, token, params=None, **extra) -> str:
    response = post(client, request("initialize", params or INIT_PARAMS), token, **extra)
    assert response.status_code == 200, response.content
    return response["Mcp-Session-Id"]


def error_of(response) -> dict:
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]


def result_of(response) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()
    assert "error" not in body, body
    return body["result"]


# --- resource, Origin, authentication -------------------------------------------------------


def test_disabled_resource_is_404(client, resource, token):
    resource.enabled = False
    resource.save()
    response = post(client, request("initialize", INIT_PARAMS), token)
    assert response.status_code == 404
    assert error_of(response)["code"] == -32600


def test_trailing_slash_is_the_same_resource_and_never_redirected(client, token):
    response = post(client, request("initialize", INIT_PARAMS), token, path="/mcp/")
    assert response.status_code == 200
    session_id = response["Mcp-Session-Id"]
    assert result_of(post(client, request("ping"), token, session_id, path="/mcp/")) == {}
    assert result_of(post(client, request("ping"), token, session_id, path="/mcp")) == {}


@pytest.mark.parametrize("origin", ["https://evil.example", "http://testserver.evil.example", "null"])
def test_foreign_origin_is_403(client, token, origin):
    response = post(client, request("initialize", INIT_PARAMS), token, Origin=origin)
    assert response.status_code == 403
    assert error_of(response)["code"] == -32600
    assert "Access-Control-Allow-Origin" not in response
    assert not McpSession.objects.exists()


@pytest.mark.parametrize("origin", ["http://testserver", "http://localhost:6274", "http://127.0.0.1:3000"])
def test_allowed_origin_gets_cors_headers(client, token, origin):
    response = post(client, request("initialize", INIT_PARAMS), token, Origin=origin)
    assert response.status_code == 200
    assert response["Access-Control-Allow-Origin"] == origin
    assert "Mcp-Session-Id" in response["Access-Control-Expose-Headers"]


def test_foreign_origin_is_refused_before_authentication(client, resource):
    response = post(client, request("initialize", INIT_PARAMS), None, Origin="https://evil.example")
    assert response.status_code == 403 and "WWW-Authenticate" not in response


def test_preflight_is_answered_without_a_token(client, resource):
    response = client.options(
        "/mcp",
        headers={"Origin": "http://localhost:6274", "Access-Control-Request-Method": "POST"},
    )
    assert response.status_code == 204
    assert "Mcp-Session-Id" in response["Access-Control-Allow-Headers"]


def test_preflight_allows_the_2026_headers_a_browser_client_sends(client, resource):
    """A browser client of 2026-07-28 sends Mcp-Method and Mcp-Name on every request, and
    Mcp-Param-* for a tool's x-mcp-header arguments: the preflight must allow them (it did not)."""
    response = client.options(
        "/mcp",
        headers={
            "Origin": "http://localhost:6274",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, mcp-method, mcp-name, mcp-param-region, x-evil",
        },
    )
    assert response.status_code == 204
    allowed = {h.strip().lower() for h in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "mcp-method", "mcp-name", "mcp-param-region", "mcp-protocol-version"} <= allowed
    assert "x-evil" not in allowed


@pytest.mark.parametrize("method", ["post", "get", "delete"])
def test_every_method_needs_a_token_even_with_an_empty_body(client, resource, method):
    response = getattr(client, method)("/mcp")
    assert response.status_code == 401
    challenge = response["WWW-Authenticate"]
    assert challenge.startswith('Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"')
    assert 'scope="mcp"' in challenge and "error=" not in challenge


@pytest.mark.parametrize("method", ["post", "get", "delete"])
def test_invalid_token_is_401_invalid_token(client, resource, method):
    response = getattr(client, method)("/mcp", headers={"Authorization": "Bearer not-a-real-token"})
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_token_for_another_resource_is_401(client, resource, user, public_app, mint_token):
    foreign = mint_token(user, public_app, resource="https://other.example/mcp")
    response = post(client, request("initialize", INIT_PARAMS), foreign)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_other_http_methods_are_405_after_authentication(client, token):
    assert client.put("/mcp").status_code == 401
    response = client.put("/mcp", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 405
    assert response["Allow"] == "POST, DELETE"


# --- POST framing --------------------------------------------------------------------------


@pytest.mark.parametrize("accept", [None, "application/json", "text/event-stream", "text/html", "application/*"])
def test_post_accept_must_list_json_and_sse(client, token, accept):
    headers = {"Authorization": f"Bearer {token}"}
    if accept is not None:
        headers["Accept"] = accept
    body = json.dumps(request("initialize", INIT_PARAMS))
    response = client.post("/mcp", body, content_type="application/json", headers=headers)
    assert response.status_code == 406
    assert error_of(response)["code"] == -32600


@pytest.mark.parametrize(
    "accept",
    [
        "*/*",
        "application/json, text/event-stream",
        "text/event-stream;q=0.9, application/json;q=1.0",
        "application/*, text/*",
    ],
)
def test_post_accept_variants_that_are_enough(client, token, accept):
    response = post(client, request("initialize", INIT_PARAMS), token, Accept=accept)
    assert response.status_code == 200


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", ""])
def test_post_content_type_must_be_json(client, token, content_type):
    response = post(client, json.dumps(request("ping")), token, raw=True, content_type=content_type)
    assert response.status_code == 415
    assert error_of(response)["code"] == -32600


def test_json_content_type_with_charset_is_fine(client, token):
    response = post(client, request("initialize", INIT_PARAMS), token, content_type="application/json; charset=utf-8")
    assert response.status_code == 200


def test_body_over_the_limit_is_413(client, token, settings):
    fits = request("initialize", INIT_PARAMS)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MAX_REQUEST_BYTES": len(json.dumps(fits))}
    assert post(client, fits, token).status_code == 200
    one_byte_more = request("initialize", {**INIT_PARAMS, "clientInfo": {"name": "test-client!", "version": "9.9"}})
    response = post(client, one_byte_more, token)
    assert response.status_code == 413
    assert error_of(response)["code"] == -32600


HOSTILE_BODIES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": None},
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 5, "capabilities": [], "clientInfo": "x"},
    },
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {**INIT_PARAMS, "clientInfo": {"name": "nul\u0000", "version": "1"}},
    },
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {**INIT_PARAMS, "clientInfo": {"name": "\ud800", "version": "1"}},
    },
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {**INIT_PARAMS, "capabilities": {"x": {"y": [[[[None]]]]}}},
    },
    {"jsonrpc": "2.0", "id": "ünïcødé ☃ \ud83d\ude00", "method": "ping"},
    {"jsonrpc": "2.0", "id": -(2**63) + 1, "method": "tools/list", "params": {"cursor": None}},
    {"jsonrpc": "2.0", "id": 1, "method": "ünknown/méthod ☃"},
    {"jsonrpc": "2.0", "id": 1, "method": "x" * 100_000},
    {"jsonrpc": "2.0", "method": "notifications/whatever", "params": {"a": [1, {"b": None}]}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": 5, "message": None}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "client could not parse"}},
    {"jsonrpc": "2.0", "id": "srv-unknown", "result": {"anything": True}},
]


@pytest.mark.parametrize("body", HOSTILE_BODIES)
def test_hostile_bodies_never_cause_a_server_error(client, token, body):
    response = post(client, body, token)
    assert response.status_code in (200, 202, 400, 404), response.content
    if response.status_code != 202:
        json.loads(response.content)


@pytest.mark.parametrize(
    "params",
    [
        None,
        {"name": 5},
        {"name": ["add"]},
        {"name": "add", "arguments": "a=1"},
        {"name": "add", "arguments": [1, 2]},
        {"name": "add", "arguments": {"a": {"deep": [1, [2, [3]]]}}},
        {"name": "add", "arguments": {"a": 10**400}},
        {"name": "add", "arguments": {"a": "1" * 1000}},
        {"name": "add", "_meta": "not an object"},
        {"name": "add", "arguments": {"a": 1}, "_meta": {"progressToken": {"not": "valid"}}},
        {"name": "\u0000"},
    ],
)
def test_hostile_tool_calls_are_invalid_params_not_errors(client, token, params):
    """A malformed request is -32602; arguments that fail the schema are a tool execution error
    naming them (MCP 2025-11-25 "Tools" § Error Handling); never a server error."""
    session_id = initialize(client, token)
    response = post(client, request("tools/call", params), token, session_id)
    assert response.status_code == 200, response.content
    body = response.json()
    if "error" in body:
        assert body["error"]["code"] == -32602
    elif body["result"]["isError"]:
        assert body["result"]["content"][0]["text"].startswith("Invalid arguments for tool 'add': ")


# --- initialize and sessions ----------------------------------------------------------------


def test_get_under_wsgi_is_405(client, token):
    session_id = initialize(client, token)
    response = client.get("/mcp", headers=mcp_headers(token, session_id, Accept="text/event-stream"))
    assert response.status_code == 405
    assert response["Allow"] == "POST, DELETE"


# --- methods -------------------------------------------------------------------------------


def test_view_with_its_own_registry(rf, token, client):
    other = ToolRegistry("other")
    other.register(lambda: "from the other registry", name="only_here")
    view = McpView.as_view(registry=other)
    session_id = initialize(client, token)
    body = json.dumps(request("tools/list"))
    req = rf.post("/mcp", body, content_type="application/json", headers=mcp_headers(token, session_id))
    result = json.loads(async_to_sync(view)(req).content)["result"]
    assert [tool["name"] for tool in result["tools"]] == ["only_here"]
    assert McpView(registry="tests.mcp_oauth.mcp_server.transport.test_views.REGISTRY").registry is REGISTRY


# --- ASGI: SSE for tools/call, the GET stream --------------------------------------------------


def asgi(coroutine_function):
    """Run an async test body on the test thread's event loop bridge (ORM stays in the test transaction)."""
    return async_to_sync(coroutine_function)()


def parse_sse(data: bytes) -> list[dict]:
    """``[{"id": …, "event": …, "data": <parsed JSON>}]`` for every event with data (comments skipped)."""
    events = []
    for block in data.decode().split("\n\n"):
        fields: dict = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            fields[key] = value
        if "data" in fields:
            fields["data"] = json.loads(fields["data"])
            events.append(fields)
    return events


async def async_initialize(aclient: AsyncClient, token: str) -> str:
    response = await aclient.post(
        "/mcp",
        json.dumps(request("initialize", INIT_PARAMS)),
        content_type="application/json",
        headers=mcp_headers(token),
    )
    assert response.status_code == 200
    return response["Mcp-Session-Id"]


async def read_events(iterator, count: int) -> list[dict]:
    """Read SSE chunks until ``count`` events with data have arrived."""
    buffer = b""
    while len(parse_sse(buffer)) < count:
        buffer += await iterator.__anext__()
    return parse_sse(buffer)


# --- the official MCP Python SDK against uvicorn ----------------------------------------------


@pytest.fixture
def uvicorn_server(transactional_db, settings):
    """The reference project under uvicorn on a free loopback port, with this module's tools."""
    from mcp_oauth.resource_server.default_resource import ensure_default_resource
    from project.asgi import application
    from tests.support.live import free_port, run_asgi_server

    port = free_port()
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "BASE_URL": f"http://127.0.0.1:{port}",
        "SSE_POLL_INTERVAL_SECONDS": 0.05,
    }
    resource = ensure_default_resource()
    with run_asgi_server(application, port) as base:
        yield base, resource


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_official_sdk_client(uvicorn_server, user, public_app, mint_token, mode):
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    base, resource = uvicorn_server
    raw_token = mint_token(user, public_app, resource=resource.uri)
    progress: list[tuple] = []
    logs: list = []
    outbox_seen = anyio.Event()
    requests_seen: list[tuple[str, str]] = []

    async def on_progress(value, total, message):
        progress.append((value, total, message))

    async def on_log(params):
        logs.append(params.data)
        if params.data == "from the outbox":
            outbox_seen.set()

    async def record(req):
        requests_seen.append((req.method, req.headers.get("mcp-protocol-version", "")))

    async def scenario():
        headers = {"Authorization": f"Bearer {raw_token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"request": [record]}) as http:
            transport = streamable_http_client(base + "/mcp", http_client=http)
            async with Client(transport, mode=mode, logging_callback=on_log) as mcp:
                tools = await mcp.list_tools()
                added = await mcp.call_tool("add", {"a": 20, "b": 22})
                failed = await mcp.call_tool("crash", {})
                streamed = await mcp.call_tool("slow_steps", {"steps": 2}, progress_callback=on_progress)
                if mode == "auto":  # 2026-07-28: stateless, no session, no outbox; listen instead of GET
                    from mcp.client.subscriptions import ToolsListChanged

                    from mcp_oauth.mcp_server.transport.subscriptions import publish_list_changed

                    async with mcp.listen(tools_list_changed=True) as subscription:
                        honored = subscription.honored
                        publish_list_changed("prompts")  # not asked for: never delivered
                        publish_list_changed("tools")
                        with anyio.fail_after(10):
                            event = await subscription.__anext__()
                    assert honored.tools_list_changed is True and not honored.prompts_list_changed
                    assert isinstance(event, ToolsListChanged)
                    return tools, added, failed, streamed, None
                session = await sync_to_async(McpSession.objects.filter(ended_at__isnull=True).latest)("created_at")
                await sync_to_async(enqueue_session_message)(
                    session.pk,
                    {"method": "notifications/message", "params": {"level": "info", "data": "from the outbox"}},
                )
                with anyio.fail_after(20):
                    await outbox_seen.wait()
                return tools, added, failed, streamed, session.pk

    tools, added, failed, streamed, session_id = anyio.run(scenario)
    assert [tool.name for tool in tools.tools] == [tool.name for tool in REGISTRY.list()]
    assert added.structured_content == {"sum": 42} and not added.is_error
    assert failed.is_error
    assert streamed.content[0].text == "did 2 steps"
    assert progress == [(1, 2, "step 1"), (2, 2, "step 2")]
    if mode == "auto":
        # server/discover answered: the client speaks 2026-07-28, statelessly
        assert requests_seen[0] == ("POST", "2026-07-28")
        assert {v for _, v in requests_seen} == {"2026-07-28"}
        assert not [m for m, _ in requests_seen if m in ("GET", "DELETE")]
        assert not McpSession.objects.exists()
        return
    assert {"finished": 2} in logs and "from the outbox" in logs
    # the client ended the session with DELETE on exit
    assert McpSession.objects.get(pk=session_id).ended_at is not None
    assert ("GET", "2025-11-25") in requests_seen and ("DELETE", "2025-11-25") in requests_seen
