"""The Streamable HTTP MCP endpoint (MCP 2025-11-25 "Transports"), through Django's test clients.

``Client`` exercises the WSGI path (JSON responses only, GET 405); ``AsyncClient``
(driven with ``async_to_sync`` so the ORM stays in the test's transaction)
exercises the ASGI path: SSE for ``tools/call`` and the session's GET stream.
The last tests run the official MCP Python SDK client against uvicorn.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import AsyncClient, Client
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_oauth.mcp_server.tools import McpError, ToolContext, ToolError, ToolRegistry
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message, forget_session
from mcp_oauth.mcp_server.transport.views import McpView
from mcp_oauth.models import McpSession, McpSessionEvent
from mcp_oauth.signals import mcp_session_ended, mcp_session_started, tool_called

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
def greet(ctx: ToolContext, name: str) -> str:
    """Greet someone as the token's user."""
    return f"hello {name} from {ctx.user.get_username()} via {ctx.client_id}"


@REGISTRY.tool
def crash() -> str:
    raise RuntimeError("internal detail that must not leak")


@REGISTRY.tool
def refuse() -> str:
    raise ToolError("I will not.")


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


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"{'single': 'quotes'}",
        b"\xff\xfe\x00",
        b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": Infinity}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": 1e400}}',
        b"[" * 100_000,
        b"1" * 5000,
        # Attack: repeated member names (RFC 8259 §4). The last one used to win silently, so a
        # gateway or policy engine reading the first saw another method or tool than the one run.
        b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "method": "tools/list"}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a", "name": "b"}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a", "arguments": {"x": 1, "x": 2}}}',
    ],
    ids=[
        "truncated",
        "single-quotes",
        "not-utf8",
        "nan",
        "infinity",
        "overflow",
        "deep-nesting",
        "too-many-digits",
        "duplicate-method",
        "duplicate-tool-name",
        "duplicate-argument",
    ],
)
def test_not_json_is_400_parse_error(client, token, body):
    response = post(client, body, token, raw=True)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32700
    assert response.json()["id"] is None
    # the input's fault in words, not the parser's exception class
    assert error["message"] in (
        "Parse error: the body is not valid JSON",
        "Parse error: the body is not UTF-8",
        "Parse error: the JSON is nested too deeply",
        "Parse error: a member name is repeated",
    )


def test_an_id_with_a_lone_surrogate_is_an_invalid_request_not_echoed(client, token):
    """The id is echoed in the response: a lone surrogate there is JSON no strict client parses
    (RFC 8259 §8.2), so the request is -32600 with a null id, as any other unusable id."""
    body = b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}'
    response = post(client, body, token, raw=True)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600
    assert response.json()["id"] is None
    assert b"ud800" not in response.content


@pytest.mark.parametrize(
    "message",
    [
        None,
        42,
        "a string",
        True,
        [],
        [{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
        {},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": {"nested": ["garbage"]}, "method": "ping"},
        {"jsonrpc": "2.0", "id": [1], "method": "ping"},
        {"jsonrpc": "2.0", "id": 10**30, "method": "ping"},
        {"jsonrpc": "2.0", "id": "x" * 5000, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": 1, "method": ""},
        {"jsonrpc": "2.0", "id": 1, "method": None},
        {"jsonrpc": "2.0", "id": 1, "method": ["ping"]},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1, 2]},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": "not an object"},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "both"}},
        {"jsonrpc": "2.0", "id": 1, "error": "not an object"},
        {"jsonrpc": "2.0", "result": {}},
    ],
)
def test_not_a_jsonrpc_message_is_400_invalid_request(client, token, message):
    response = post(client, message, token)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32600


def test_invalid_request_echoes_a_readable_id(client, token):
    response = post(client, {"jsonrpc": "2.0", "id": 77, "method": "ping", "params": [1]}, token)
    assert response.status_code == 400 and response.json()["id"] == 77
    response = post(client, {"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, token)
    assert response.status_code == 400 and response.json()["id"] is None


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


# --- protocol version header ----------------------------------------------------------------


ALL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


@pytest.mark.parametrize("version", ["2099-01-01", "garbage", ""])
def test_unsupported_protocol_version_header_is_400(client, token, version):
    session_id = initialize(client, token)
    response = post(client, request("ping"), token, session_id, **{"MCP-Protocol-Version": version})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"] == {"supported": ALL_VERSIONS, "requested": version}


def test_a_modern_version_header_on_a_session_request_is_served_as_modern(client, token):
    """MCP 2026-07-28: the era is chosen per request; a 2026-07-28 header without the
    ``_meta`` envelope is an invalid modern request (400 -32602), never a session request."""
    session_id = initialize(client, token)
    response = post(client, request("ping"), token, session_id, **{"MCP-Protocol-Version": "2026-07-28"})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_supported_protocol_version_headers(client, token, version):
    session_id = initialize(client, token)
    response = post(client, request("ping"), token, session_id, **{"MCP-Protocol-Version": version})
    assert result_of(response) == {}


def test_server_discover_probe_is_answered_without_a_session(client, token):
    """What the SDK sends first in mode="auto": no session, a 2026 version header and envelope."""
    params = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    response = post(
        client,
        request("server/discover", params),
        token,
        **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    result = response.json()["result"]
    assert result["supportedVersions"] == ALL_VERSIONS
    assert result["resultType"] == "complete"
    assert not McpSession.objects.exists()


# --- initialize and sessions ----------------------------------------------------------------


def test_initialize_creates_a_bound_session(client, token, user, public_app, resource):
    started = []
    mcp_session_started.connect(lambda **kw: started.append(kw["session"].pk), weak=False, dispatch_uid="t-start")
    try:
        response = post(client, request("initialize", INIT_PARAMS, id="init-1"), token)
    finally:
        mcp_session_started.disconnect(dispatch_uid="t-start")
    body = response.json()
    assert body["id"] == "init-1"
    assert body["result"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "tools": {"listChanged": False},
            "logging": {},
            # the demo project's resources and prompts (project/mcp_resources.py, mcp_prompts.py)
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
            # the ext-auth extensions this server offers in both eras (not Tasks: 2026-07-28 only)
            "extensions": {
                "io.modelcontextprotocol/oauth-client-credentials": {},
                "io.modelcontextprotocol/enterprise-managed-authorization": {},
            },
        },
        "serverInfo": {"name": "django-mcp-authz", "version": "0.1.0"},
    }
    session = McpSession.objects.get(pk=response["Mcp-Session-Id"])
    assert (session.user, session.application, session.resource) == (user, public_app, resource)
    assert session.protocol_version == "2025-11-25"
    assert session.client_capabilities == INIT_PARAMS["capabilities"]
    assert session.client_info == INIT_PARAMS["clientInfo"]
    assert len(session.pk) >= 43 and started == [session.pk]


@pytest.mark.parametrize(
    ("offered", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_version_negotiation(client, token, offered, negotiated):
    response = post(client, request("initialize", {**INIT_PARAMS, "protocolVersion": offered}), token)
    assert result_of(response)["protocolVersion"] == negotiated
    assert McpSession.objects.get(pk=response["Mcp-Session-Id"]).protocol_version == negotiated


def test_server_info_and_instructions_come_from_settings(client, token, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "SERVER_NAME": "acme",
        "SERVER_VERSION": "7.1",
        "INSTRUCTIONS": "Be nice.",
    }
    result = result_of(post(client, request("initialize", INIT_PARAMS), token))
    assert result["serverInfo"] == {"name": "acme", "version": "7.1"}
    assert result["instructions"] == "Be nice."


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"protocolVersion": "2025-11-25"},
        {**INIT_PARAMS, "clientInfo": {"version": "1"}},
        {**INIT_PARAMS, "capabilities": []},
    ],
)
def test_initialize_with_invalid_params_is_32602(client, token, params):
    response = post(client, request("initialize", params), token)
    assert response.status_code == 200
    assert error_of(response)["code"] == -32602
    assert "Mcp-Session-Id" not in response
    assert not McpSession.objects.exists()


def test_initialized_notification_is_202(client, token):
    session_id = initialize(client, token)
    response = post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session_id)
    assert response.status_code == 202 and response.content == b""


def test_client_responses_and_unknown_notifications_are_202(client, token):
    session_id = initialize(client, token)
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1, {"x": 2}]}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}, "reason": 5}},
        {"jsonrpc": "2.0", "id": "srv-1", "result": {}},
        {"jsonrpc": "2.0", "id": "srv-2", "error": {"code": -1, "message": "declined"}},
    ):
        response = post(client, message, token, session_id)
        assert response.status_code == 202 and response.content == b""


def test_requests_other_than_initialize_need_the_session_header(client, token):
    initialize(client, token)
    for message in (request("ping"), request("tools/list"), {"jsonrpc": "2.0", "method": "notifications/initialized"}):
        response = post(client, message, token)
        assert response.status_code == 400
        assert error_of(response)["code"] == -32600


def _not_found(response) -> bytes:
    assert response.status_code == 404, response.content
    return response.content


def test_unknown_ended_expired_and_foreign_sessions_are_identical_404s(
    client, token, resource, user, other_user, public_app, mint_token, settings
):
    def ping(session_id, with_token=token):
        return post(client, request("ping"), with_token, session_id)

    answers = set()
    answers.add(_not_found(ping("no-such-session")))
    answers.add(_not_found(ping("../../etc/passwd")))
    answers.add(_not_found(ping("x" * 500)))

    # another user's token (same client), another client's token (same user)
    session_id = initialize(client, token)
    other_user_token = mint_token(other_user, public_app, resource=resource.uri)
    answers.add(_not_found(ping(session_id, other_user_token)))
    other_app = get_application_model().objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
    )
    answers.add(_not_found(ping(session_id, mint_token(user, other_app, resource=resource.uri))))
    assert result_of(ping(session_id)) == {}

    # idle-expired
    McpSession.objects.filter(pk=session_id).update(last_seen_at=timezone.now() - timedelta(days=2))
    forget_session(session_id)  # a bulk update sends no signal (the session cache's documented contract)
    answers.add(_not_found(ping(session_id)))

    # ended
    ended = initialize(client, token)
    McpSession.objects.filter(pk=ended).update(ended_at=timezone.now())
    answers.add(_not_found(ping(ended)))
    assert len(answers) == 1, f"every 404 must look the same: {answers}"


def test_a_used_session_stays_alive(client, token, settings):
    session_id = initialize(client, token)
    old = timezone.now() - timedelta(hours=23)
    McpSession.objects.filter(pk=session_id).update(last_seen_at=old)
    assert result_of(post(client, request("ping"), token, session_id)) == {}
    assert McpSession.objects.get(pk=session_id).last_seen_at > old


def test_delete_ends_the_session(client, token):
    session_id = initialize(client, token)
    ended = []
    mcp_session_ended.connect(lambda **kw: ended.append(kw["session"].pk), weak=False, dispatch_uid="t-end")
    try:
        response = client.delete("/mcp", headers=mcp_headers(token, session_id))
    finally:
        mcp_session_ended.disconnect(dispatch_uid="t-end")
    assert response.status_code == 204
    assert ended == [session_id]
    assert McpSession.objects.get(pk=session_id).ended_at is not None
    _not_found(post(client, request("ping"), token, session_id))
    _not_found(client.delete("/mcp", headers=mcp_headers(token, session_id)))


def test_delete_needs_the_session_header_and_the_owner(client, token, resource, other_user, public_app, mint_token):
    session_id = initialize(client, token)
    assert client.delete("/mcp", headers=mcp_headers(token)).status_code == 400
    intruder = mint_token(other_user, public_app, resource=resource.uri)
    _not_found(client.delete("/mcp", headers=mcp_headers(intruder, session_id)))
    assert McpSession.objects.get(pk=session_id).ended_at is None


def test_get_under_wsgi_is_405(client, token):
    session_id = initialize(client, token)
    response = client.get("/mcp", headers=mcp_headers(token, session_id, Accept="text/event-stream"))
    assert response.status_code == 405
    assert response["Allow"] == "POST, DELETE"


# --- methods -------------------------------------------------------------------------------


def test_ping(client, token):
    session_id = initialize(client, token)
    response = post(client, request("ping", id="p"), token, session_id)
    assert response.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}


@pytest.mark.parametrize("method", ["resources/lists", "prompts/delete", "tasks/list", "sampling/createMessage"])
def test_unknown_methods_are_32601(client, token, method):
    session_id = initialize(client, token)
    response = post(client, request(method, {}), token, session_id)
    assert response.status_code == 200
    assert error_of(response)["code"] == -32601


def test_tools_list_shape(client, token):
    session_id = initialize(client, token)
    result = result_of(post(client, request("tools/list"), token, session_id))
    assert set(result) == {"tools"}
    tools = {tool["name"]: tool for tool in result["tools"]}
    assert list(tools) == [tool.name for tool in REGISTRY.list()]
    assert tools["add"] == {
        "name": "add",
        "title": "Add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "title": "addArguments",
            "properties": {
                "a": {"title": "A", "type": "integer"},
                "b": {"default": 0, "title": "B", "type": "integer"},
            },
            "required": ["a"],
            "additionalProperties": False,
        },
        "annotations": {"readOnlyHint": True},
    }
    # tools needing more scope are listed too: calling them is how the client learns to step up
    assert "admin_only" in tools and "ctx" not in json.dumps(tools["greet"]["inputSchema"])


def test_tools_list_with_a_cursor_we_never_issued_is_32602(client, token):
    session_id = initialize(client, token)
    response = post(client, request("tools/list", {"cursor": "abc"}), token, session_id)
    assert error_of(response)["code"] == -32602


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


def test_logging_set_level(client, token):
    session_id = initialize(client, token)
    assert result_of(post(client, request("logging/setLevel", {"level": "warning"}), token, session_id)) == {}
    assert McpSession.objects.get(pk=session_id).log_level == "warning"
    response = post(client, request("logging/setLevel", {"level": "loud"}), token, session_id)
    assert error_of(response)["code"] == -32602


# --- tools/call (JSON mode) -----------------------------------------------------------------


def call_tool(client, token, session_id, name, arguments=None, id=1):
    params = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return post(client, request("tools/call", params, id=id), token, session_id)


def test_tool_call_success_structured(client, token):
    session_id = initialize(client, token)
    response = call_tool(client, token, session_id, "add", {"a": 2, "b": 40}, id=7)
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {
            "content": [{"type": "text", "text": '{"sum": 42}'}],
            "structuredContent": {"sum": 42},
            "isError": False,
        },
    }


def test_tool_call_receives_the_principal(client, token, public_app):
    session_id = initialize(client, token)
    result = result_of(call_tool(client, token, session_id, "greet", {"name": "Bob"}))
    assert result["content"] == [{"type": "text", "text": f"hello Bob from alice via {public_app.client_id}"}]


def test_tool_exception_is_an_error_result_without_details(client, token):
    session_id = initialize(client, token)
    result = result_of(call_tool(client, token, session_id, "crash"))
    assert result["isError"] is True
    assert "internal detail" not in json.dumps(result)


def test_tool_error_message_is_shown(client, token):
    session_id = initialize(client, token)
    result = result_of(call_tool(client, token, session_id, "refuse"))
    assert result == {"content": [{"type": "text", "text": "I will not."}], "isError": True}


def test_mcp_error_from_a_tool_is_a_jsonrpc_error(client, token):
    session_id = initialize(client, token)
    response = call_tool(client, token, session_id, "needs_url", id="e")
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": "e",
        "error": {"code": -32042, "message": "URL elicitation required", "data": {"elicitations": []}},
    }


def test_unknown_tool_is_32602(client, token):
    session_id = initialize(client, token)
    error = error_of(call_tool(client, token, session_id, "nope"))
    assert error["code"] == -32602 and "nope" in error["message"]


def test_invalid_arguments_are_a_tool_execution_error_listing_the_fields(client, token):
    """MCP 2025-11-25 "Tools" § Error Handling (SEP-1303): input validation errors are tool
    execution errors (``isError: true``) the model can correct, not JSON-RPC -32602."""
    session_id = initialize(client, token)
    response = call_tool(client, token, session_id, "add", {"a": "two", "c": 3})
    assert response.status_code == 200
    result = result_of(response)
    assert result["isError"] is True
    [block] = result["content"]
    assert block["type"] == "text" and block["text"].startswith("Invalid arguments for tool 'add': ")
    assert "a: " in block["text"] and "c: " in block["text"]
    result = result_of(call_tool(client, token, session_id, "add", None))
    assert result["isError"] is True and "a: Field required" in result["content"][0]["text"]


def test_arguments_that_are_not_an_object_stay_32602(client, token):
    """Params that fail the CallToolRequest schema are a protocol error."""
    session_id = initialize(client, token)
    error = error_of(call_tool(client, token, session_id, "add", ["a"]))
    assert error["code"] == -32602


def test_tool_called_signal(client, token, user):
    calls = []

    def receiver(**kw):
        calls.append((kw["tool"].name, kw["principal"].user, kw["is_error"]))

    tool_called.connect(receiver, weak=False, dispatch_uid="t-called")
    try:
        session_id = initialize(client, token)
        call_tool(client, token, session_id, "add", {"a": 1})
        call_tool(client, token, session_id, "crash")
        call_tool(client, token, session_id, "add", {"a": "bad"})  # rejected before running: no signal
    finally:
        tool_called.disconnect(dispatch_uid="t-called")
    assert calls == [("add", user, False), ("crash", user, True)]


def test_tool_needing_more_scope_gets_a_403_step_up_challenge(client, token):
    session_id = initialize(client, token)
    response = call_tool(client, token, session_id, "admin_only")
    assert response.status_code == 403
    challenge = response["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="mcp admin"' in challenge
    assert 'resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp"' in challenge
    assert "admin_only" in challenge
    assert response.json()["error"] == "insufficient_scope"


def test_tool_with_its_scope_runs(client, resource, user, public_app, mint_token):
    strong = mint_token(user, public_app, scope="mcp admin", resource=resource.uri)
    session_id = initialize(client, strong)
    assert result_of(call_tool(client, strong, session_id, "admin_only"))["content"][0]["text"] == "admin stuff"


def test_progress_and_logs_are_dropped_in_json_mode(client, token):
    session_id = initialize(client, token)
    response = post(
        client,
        request("tools/call", {"name": "slow_steps", "arguments": {"steps": 2}, "_meta": {"progressToken": 5}}),
        token,
        session_id,
    )
    assert response["Content-Type"] == "application/json"
    assert result_of(response)["content"][0]["text"] == "did 2 steps"


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


async def read_events(iterator, count: int) -> list[dict]:
    """Read SSE chunks until ``count`` events with data have arrived."""
    buffer = b""
    while len(parse_sse(buffer)) < count:
        buffer += await iterator.__anext__()
    return parse_sse(buffer)


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


def test_enqueue_session_message_validation(client, token):
    session_id = initialize(client, token)
    with pytest.raises(ValueError):
        enqueue_session_message(session_id, {"jsonrpc": "2.0", "id": 1, "result": {}})
    with pytest.raises(ValueError):
        enqueue_session_message(session_id, {"params": {}})
    with pytest.raises(ValueError):
        enqueue_session_message(session_id, {"method": "x", "params": [1]})
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message("nope", {"method": "notifications/x"})
    McpSession.objects.filter(pk=session_id).update(ended_at=timezone.now())
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message(session_id, {"method": "notifications/x"})


def test_enqueue_session_message_to_a_loaded_session_checks_that_row(client, token):
    """Given the row the caller loaded, liveness is judged on it (ended, idle) like ``live()``."""
    session = McpSession.objects.get(pk=initialize(client, token))
    assert session.is_live
    event = enqueue_session_message(session, {"method": "notifications/x"})
    assert event.session_id == session.pk and event.message == {"jsonrpc": "2.0", "method": "notifications/x"}
    from mcp_oauth.settings import mcp_oauth_settings

    session.last_seen_at = timezone.now() - timedelta(seconds=mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS + 60)
    assert not session.is_live
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message(session, {"method": "notifications/x"})
    session.last_seen_at, session.ended_at = timezone.now(), timezone.now()
    with pytest.raises(McpSession.DoesNotExist):
        enqueue_session_message(session, {"method": "notifications/x"})
    assert McpSessionEvent.objects.filter(session=session).count() == 1


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


# --- the official MCP Python SDK against uvicorn ----------------------------------------------


@pytest.fixture
def uvicorn_server(transactional_db, settings):
    """The reference project under uvicorn on a free loopback port, with this module's tools."""
    from mcp_oauth.signals import ensure_default_resource
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
