"""MCP 2026-07-28 stateless requests on the same ``/mcp`` (Django test clients).

The validation ladder with exact codes and statuses, ``server/discover``, result decorations
(``resultType``, ``ttlMs``/``cacheScope``, ``serverInfo``), no database session, elicitation as
``input_required`` results and the sealed ``requestState`` under attack, notifications on a
request's own SSE response, ``subscriptions/listen``.
"""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from asgiref.sync import async_to_sync
from cryptography.fernet import Fernet
from django.test import AsyncClient, Client

from elicitation.api import elicit_form, require_connection, require_secret
from elicitation.form import ElicitationSchema
from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.service import complete_elicitation
from mcp_oauth.mcp_server.tools import ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport import drain
from mcp_oauth.mcp_server.transport.methods import methods
from mcp_oauth.mcp_server.transport.table import MODERN
from mcp_oauth.models import McpSession

REGISTRY = ToolRegistry("modern-tests")
V = "2026-07-28"
ALL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
ACCEPT = "application/json, text/event-stream"
FULL_CAPS = {"elicitation": {"form": {}, "url": {}}}
NAME_FORM = ElicitationSchema(
    {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer"}},
        "required": ["name"],
    }
)
CITY_FORM = ElicitationSchema({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


@REGISTRY.tool
def who(ctx: ToolContext) -> dict:
    return {"user": ctx.user.get_username(), "session": ctx.session is not None, "era": ctx.era}


@REGISTRY.tool
async def ask(ctx: ToolContext, greeting: str = "Hello") -> str:
    answer = await elicit_form(ctx, "What is your name?", NAME_FORM)
    if answer.action != "accept":
        return f"no name ({answer.action})"
    return f"{greeting}, {answer.content['name']}!"


@REGISTRY.tool
async def ask_twice(ctx: ToolContext) -> str:
    name = await elicit_form(ctx, "Name?", NAME_FORM)
    city = await elicit_form(ctx, "City?", CITY_FORM)
    return f"{name.content['name']} from {city.content['city']}"


@REGISTRY.tool
async def profile(ctx: ToolContext) -> str:
    account = await require_connection(ctx, "demo", ["profile"])
    return f"connected as {account.account_label}"


@REGISTRY.tool
async def api_key(ctx: ToolContext) -> str:
    value = await require_secret(ctx, "demo_key", "Type your key")
    return f"key has {len(value)} characters"


@REGISTRY.tool
async def chatty(ctx: ToolContext) -> str:
    await ctx.report_progress(1, 2, "half")
    await ctx.log("info", "info line")
    await ctx.log("debug", "debug line")
    return "done"


@REGISTRY.tool(scopes=["admin"])
def admin_only() -> str:
    return "admin"


@pytest.fixture(autouse=True)
def _registry(settings):
    """This module's tools; an https site (URL elicitation refuses plain http); an encryption key."""
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "BASE_URL": "https://testserver",
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.transport.test_modern.REGISTRY",
        "SSE_POLL_INTERVAL_SECONDS": 0.02,
    }
    settings.ELICITATION = {"ENCRYPTION_KEYS": [Fernet.generate_key().decode()], "URL_RETRY_WAIT_SECONDS": 0.1}


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def envelope(caps=None, **extra) -> dict:
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": FULL_CAPS if caps is None else caps,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    meta.update(extra)
    return meta


def body(method: str, params: dict | None = None, id=1, caps=None, meta=None) -> dict:
    params = dict(params or {})
    params["_meta"] = envelope(caps) if meta is None else meta
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def headers(token: str, method: str, name: str | None = None, **extra) -> dict:
    h = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "MCP-Protocol-Version": V, "Mcp-Method": method}
    if name is not None:
        h["Mcp-Name"] = name
    h.update(extra)
    return {k: v for k, v in h.items() if v is not None}


def post(client, token, message, **header_overrides):
    method = message.get("method")
    name = (message.get("params") or {}).get("name") if method == "tools/call" else None
    h = headers(token, method, name, **header_overrides)
    return client.post("/mcp", json.dumps(message), content_type="application/json", headers=h)


def call_tool(client, token, name, arguments=None, id=1, caps=None, **params):
    return post(
        client, token, body("tools/call", {"name": name, "arguments": arguments or {}, **params}, id=id, caps=caps)
    )


def error_of(response) -> dict:
    data = response.json()
    assert "result" not in data, data
    return data["error"]


def result_of(response) -> dict:
    assert response.status_code == 200, response.content
    data = response.json()
    assert "error" not in data, data
    return data["result"]


# --- the ladder -----------------------------------------------------------------------------


def test_missing_envelope_is_400_invalid_params(client, token):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = post(client, token, message)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602
    assert response.json()["id"] == 1


def test_envelope_without_capabilities_is_400_invalid_params(client, token):
    meta = {"io.modelcontextprotocol/protocolVersion": V}
    response = post(client, token, body("tools/list", meta=meta))
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize(
    ("override", "message_part"),
    [
        ({"MCP-Protocol-Version": None}, "MCP-Protocol-Version"),
        ({"MCP-Protocol-Version": "2025-11-25"}, "MCP-Protocol-Version"),
        ({"Mcp-Method": "tools/call"}, "Mcp-Method"),
        ({"Mcp-Method": None}, "Mcp-Method"),
    ],
)
def test_header_mismatch_is_400_32020(client, token, override, message_part):
    response = post(client, token, body("tools/list"), **override)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32020
    assert message_part in error["message"]


@pytest.mark.parametrize("name", [None, "ask", "WHO"])
def test_mcp_name_must_equal_the_tool_name(client, token, name):
    message = body("tools/call", {"name": "who", "arguments": {}})
    response = client.post(
        "/mcp", json.dumps(message), content_type="application/json", headers=headers(token, "tools/call", name)
    )
    assert response.status_code == 400
    assert error_of(response)["code"] == -32020


def test_optional_whitespace_around_mcp_header_values_is_not_part_of_them(client, token):
    """RFC 9110 §5.5: SP/HTAB around a field value are excluded before it is evaluated (the
    conformance check ServerAcceptsWhitespaceHeaderValue; httptools passes them through)."""
    message = body("tools/call", {"name": "who", "arguments": {}})
    padded = headers(
        token, "tools/call", "  who \t", **{"Mcp-Method": " tools/call ", "MCP-Protocol-Version": f"\t{V} "}
    )
    response = client.post("/mcp", json.dumps(message), content_type="application/json", headers=padded)
    assert result_of(response)["structuredContent"] == {"user": "alice", "session": False, "era": "modern"}


def test_mcp_name_in_base64_form_matches(client, token):
    encoded = "=?base64?" + base64.b64encode(b"who").decode() + "?="
    message = body("tools/call", {"name": "who", "arguments": {}})
    response = client.post(
        "/mcp", json.dumps(message), content_type="application/json", headers=headers(token, "tools/call", encoded)
    )
    assert result_of(response)["structuredContent"] == {"user": "alice", "session": False, "era": "modern"}


def test_unsupported_modern_version_is_400_32022_with_supported_and_requested(client, token):
    meta = envelope()
    meta["io.modelcontextprotocol/protocolVersion"] = "2099-01-01"
    response = post(client, token, body("tools/list", meta=meta), **{"MCP-Protocol-Version": "2099-01-01"})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"] == {"supported": ALL_VERSIONS, "requested": "2099-01-01"}


@pytest.mark.parametrize("method", ["nope/nothing", "initialize", "ping", "logging/setLevel", "resources/subscribe"])
def test_unknown_method_in_the_modern_era_is_404_32601(client, token, method):
    response = post(client, token, body(method))
    assert response.status_code == 404
    assert error_of(response)["code"] == -32601
    assert response.json()["id"] == 1


def test_missing_client_capability_is_400_32021(client, token):
    async def handler(call):
        return {}

    methods.register("test/needs_sampling", handler, eras={MODERN}, capability=("sampling",))
    try:
        missing = post(client, token, body("test/needs_sampling"))
        declared = post(client, token, body("test/needs_sampling", caps={"sampling": {}}))
    finally:
        methods.unregister("test/needs_sampling")
    assert missing.status_code == 400
    error = error_of(missing)
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert result_of(declared)["resultType"] == "complete"


def test_parse_error_invalid_request_and_invalid_params_are_400(client, token):
    h = headers(token, "tools/list")
    parse = client.post("/mcp", b"{not json", content_type="application/json", headers=h)
    batch = client.post("/mcp", json.dumps([body("tools/list")]), content_type="application/json", headers=h)
    unknown_tool = call_tool(client, token, "no_such_tool")
    bad_args = call_tool(client, token, "ask", {"greeting": 5})
    assert (parse.status_code, error_of(parse)["code"]) == (400, -32700)
    assert (batch.status_code, error_of(batch)["code"]) == (400, -32600)
    assert (unknown_tool.status_code, error_of(unknown_tool)["code"]) == (400, -32602)
    # input validation errors are tool execution errors (MCP "Tools" § Error Handling, SEP-1303)
    assert bad_args.status_code == 200
    bad = result_of(bad_args)
    assert bad["resultType"] == "complete" and bad["isError"] is True
    assert bad["content"][0]["text"].startswith("Invalid arguments for tool 'ask': greeting: ")


@pytest.mark.parametrize("verb", ["get", "delete"])
def test_get_and_delete_are_405_for_modern_traffic(client, token, verb):
    response = getattr(client, verb)(
        "/mcp", headers={"Authorization": f"Bearer {token}", "Accept": ACCEPT, "MCP-Protocol-Version": V}
    )
    assert response.status_code == 405
    assert response["Allow"] == "POST"


def test_a_notification_is_202_and_sessions_are_ignored(client, token):
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = client.post(
        "/mcp",
        json.dumps(note),
        content_type="application/json",
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": ACCEPT,
            "MCP-Protocol-Version": V,
            "Mcp-Session-Id": "nope",
        },
    )
    assert response.status_code == 202
    listed = post(client, token, body("tools/list"), **{"Mcp-Session-Id": "not-a-session"})
    assert listed.status_code == 200


def test_step_up_is_403_insufficient_scope(client, token):
    response = call_tool(client, token, "admin_only")
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response["WWW-Authenticate"]
    assert 'scope="mcp admin"' in response["WWW-Authenticate"]


# --- results ---------------------------------------------------------------------------------


def test_tools_list_is_private_and_cacheable(client, token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "RESULT_TTL_MS": 5000}
    result = result_of(post(client, token, body("tools/list")))
    assert [t["name"] for t in result["tools"]] == [t.name for t in REGISTRY.list()]
    assert (result["resultType"], result["ttlMs"], result["cacheScope"]) == ("complete", 5000, "private")
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "django-mcp-authz"


def test_tool_call_is_stateless(client, token):
    result = result_of(call_tool(client, token, "who"))
    assert result["resultType"] == "complete"
    assert result["structuredContent"] == {"user": "alice", "session": False, "era": "modern"}
    assert "ttlMs" not in result
    assert not McpSession.objects.exists()


# --- input_required: forms ------------------------------------------------------------------


def first_round(client, token, name="ask", arguments=None, caps=None):
    result = result_of(call_tool(client, token, name, arguments, id=1, caps=caps))
    assert result["resultType"] == "input_required", result
    return result


def retry(client, token, name, state, responses, arguments=None, id=2, **kw):
    return call_tool(client, token, name, arguments, id=id, requestState=state, inputResponses=responses, **kw)


def test_form_elicitation_round_trip(client, token, user):
    first = first_round(client, token, arguments={"greeting": "Hi"})
    assert first["inputRequests"] == {
        "input-1": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_FORM.schema},
        }
    }
    assert first["requestState"].startswith("v1.")
    row = Elicitation.objects.get()
    assert (row.mode, row.status, row.user, row.session) == ("form", "pending", user, None)
    answer = {"input-1": {"action": "accept", "content": {"name": "Ada"}}}
    done = result_of(retry(client, token, "ask", first["requestState"], answer, {"greeting": "Hi"}))
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Hi, Ada!"}]
    row.refresh_from_db()
    assert (row.status, row.content) == ("accepted", {"name": "Ada"})


@pytest.mark.parametrize(
    "responses",
    [
        {},
        {"input-1": {"action": "accept", "content": {"name": ""}}},
        {"input-1": {"action": "accept", "content": {"age": 3}}},
        {"input-9": {"action": "accept", "content": {"name": "Injected"}}},
    ],
)
def test_missing_or_invalid_answers_are_asked_again(client, token, responses):
    first = first_round(client, token)
    again = result_of(retry(client, token, "ask", first["requestState"], responses))
    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == ["input-1"]
    assert again["requestState"] != first["requestState"]
    done = result_of(
        retry(
            client,
            token,
            "ask",
            again["requestState"],
            {"input-1": {"action": "accept", "content": {"name": "Bo"}}},
            id=3,
        )
    )
    assert done["content"][0]["text"] == "Hello, Bo!"


def test_decline_is_an_answer(client, token):
    first = first_round(client, token)
    done = result_of(retry(client, token, "ask", first["requestState"], {"input-1": {"action": "decline"}}))
    assert done["content"][0]["text"] == "no name (decline)"
    assert Elicitation.objects.get().status == "declined"


def test_two_questions_carry_the_first_answer_in_the_state(client, token):
    first = first_round(client, token, "ask_twice")
    second = result_of(
        retry(
            client,
            token,
            "ask_twice",
            first["requestState"],
            {"input-1": {"action": "accept", "content": {"name": "Ada"}}},
        )
    )
    assert list(second["inputRequests"]) == ["input-2"]
    done = result_of(
        retry(
            client,
            token,
            "ask_twice",
            second["requestState"],
            {"input-2": {"action": "accept", "content": {"city": "London"}}},
            id=3,
        )
    )
    assert done["content"][0]["text"] == "Ada from London"


@pytest.mark.parametrize("caps", [{}, {"elicitation": {"url": {}}}])
def test_a_client_without_form_elicitation_gets_the_tool_error(client, token, caps):
    result = result_of(call_tool(client, token, "ask", caps=caps))
    assert result["resultType"] == "complete" and result["isError"] is True
    assert "cannot ask questions" in result["content"][0]["text"]
    assert not Elicitation.objects.exists()


# --- input_required: URL mode ------------------------------------------------------------------


@pytest.fixture
def provider(db):
    return ThirdPartyProvider.objects.create(
        slug="demo",
        name="Demo",
        client_id="c",
        authorization_endpoint="https://provider.example/authorize",
        token_endpoint="https://provider.example/token",
        scopes="profile",
    )


def connect(user, provider):
    connection = ThirdPartyConnection(user=user, provider=provider, scopes="profile", account_label="alice@demo")
    connection.access_token = "tok"
    connection.save()


def test_connection_through_a_url_input_request(client, token, user, provider):
    first = first_round(client, token, "profile")
    row = Elicitation.objects.get()
    assert (row.mode, row.kind, row.user, row.session, row.status) == ("url", "connect", user, None, "pending")
    assert first["inputRequests"] == {
        "input-1": {"method": "elicitation/create", "params": {"mode": "url", "message": row.message, "url": row.url}}
    }
    # the user has not finished: after the bounded wait, the same link again
    again = result_of(retry(client, token, "profile", first["requestState"], {"input-1": {"action": "accept"}}))
    assert again["resultType"] == "input_required"
    assert again["inputRequests"]["input-1"]["params"]["url"] == row.url
    assert Elicitation.objects.count() == 1
    # the user connects in the browser; the retry finds the row completed and the connection
    connect(user, provider)
    assert complete_elicitation(row.elicitation_id)
    done = result_of(retry(client, token, "profile", again["requestState"], {"input-1": {"action": "accept"}}, id=3))
    assert done["content"][0]["text"] == "connected as alice@demo"


def test_declining_the_link_is_a_tool_error(client, token, provider):
    first = first_round(client, token, "profile")
    done = result_of(retry(client, token, "profile", first["requestState"], {"input-1": {"action": "decline"}}))
    assert done["isError"] is True and done["content"][0]["text"] == "You did not connect your Demo account."
    assert Elicitation.objects.get().status == "declined"


def test_a_client_without_url_mode_gets_the_tool_error(client, token, provider):
    result = result_of(call_tool(client, token, "profile", caps={"elicitation": {"form": {}}}))
    assert result["isError"] is True and "cannot open a link" in result["content"][0]["text"]
    assert not Elicitation.objects.exists()


def test_secret_through_a_url_input_request(client, token, user):
    first = first_round(client, token, "api_key")
    row = Elicitation.objects.get()
    assert (row.kind, row.secret_name, row.session) == ("secret", "demo_key", None)
    secret = StoredSecret(user=user, name="demo_key")
    secret.value = "s3cr3t"
    secret.save()
    assert complete_elicitation(row.elicitation_id)
    done = result_of(retry(client, token, "api_key", first["requestState"], {"input-1": {"action": "accept"}}))
    assert done["content"][0]["text"] == "key has 6 characters"


# --- streaming: notifications on the request's own response; subscriptions/listen -------------


def parse_sse(raw: bytes) -> list[dict]:
    events = []
    for block in raw.decode().split("\n\n"):
        data = [line[5:].strip() for line in block.splitlines() if line.startswith("data:")]
        if data:
            events.append(json.loads("".join(data)))
    return events


def test_progress_and_log_messages_stream_only_as_asked(token):
    async def go(meta_extra):
        aclient = AsyncClient()
        message = body("tools/call", {"name": "chatty", "arguments": {}}, meta={**envelope(), **meta_extra})
        response = await aclient.post(
            "/mcp", json.dumps(message), content_type="application/json", headers=headers(token, "tools/call", "chatty")
        )
        if response["Content-Type"] == "application/json":
            return response["Content-Type"], [json.loads(response.content)]
        return response["Content-Type"], parse_sse(b"".join([chunk async for chunk in response.streaming_content]))

    kind, messages = async_to_sync(go)({"progressToken": "p1", "io.modelcontextprotocol/logLevel": "info"})
    assert kind == "text/event-stream"
    assert [m.get("method") for m in messages] == ["notifications/progress", "notifications/message", None]
    assert messages[0]["params"] == {"progressToken": "p1", "progress": 1, "total": 2, "message": "half"}
    assert messages[1]["params"] == {"level": "info", "data": "info line"}
    assert messages[-1]["result"]["resultType"] == "complete"
    # no progress token, no log level: nothing to send, so a plain JSON response
    kind, messages = async_to_sync(go)({})
    assert kind == "application/json"
    assert messages[0]["result"]["content"][0]["text"] == "done"


def test_an_answer_that_is_not_an_elicit_result_is_400_invalid_params(client, token):
    first = first_round(client, token)
    response = retry(client, token, "ask", first["requestState"], {"input-1": {"action": "maybe"}})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


def test_a_retry_is_held_open_with_keepalives_until_the_flow_completes(token, user, provider, settings):
    """The client accepted the link; the user is still in the browser. The retry's response
    commits to SSE, sends keepalive comments, and carries the tool's result once the flow completes."""
    from asgiref.sync import sync_to_async

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SSE_KEEPALIVE_SECONDS": 0.1}
    settings.ELICITATION = {**settings.ELICITATION, "URL_RETRY_WAIT_SECONDS": 30}
    first = first_round(Client(), token, "profile")
    row = Elicitation.objects.get()

    async def go():
        async def user_finishes():
            await asyncio.sleep(0.5)
            await sync_to_async(connect)(user, provider)
            assert await sync_to_async(complete_elicitation)(row.elicitation_id)

        finishing = asyncio.ensure_future(user_finishes())
        message = body(
            "tools/call",
            {
                "name": "profile",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {"input-1": {"action": "accept"}},
            },
            id=2,
        )
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await AsyncClient().post(
            "/mcp",
            json.dumps(message),
            content_type="application/json",
            headers=headers(token, "tools/call", "profile"),
        )
        raw = b"".join([chunk async for chunk in response.streaming_content])
        await finishing
        return response["Content-Type"], raw, loop.time() - started

    content_type, raw, elapsed = async_to_sync(go)()
    assert content_type == "text/event-stream"
    assert raw.count(b": keepalive") >= 2
    (final,) = parse_sse(raw)
    assert final["id"] == 2 and final["result"]["content"][0]["text"] == "connected as alice@demo"
    assert elapsed >= 0.5  # it waited for the user


def test_a_held_retry_is_answered_input_required_at_once_when_the_worker_drains(token, provider, settings):
    """SIGTERM while a retry waits for the user: the retry gets ``input_required`` with the same
    link at once (the client's next retry reaches a worker that is not stopping), instead of
    holding the stopping worker until ``URL_RETRY_WAIT_SECONDS`` (30 s here)."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SSE_KEEPALIVE_SECONDS": 0.1}
    settings.ELICITATION = {**settings.ELICITATION, "URL_RETRY_WAIT_SECONDS": 30}
    first = first_round(Client(), token, "profile")
    row = Elicitation.objects.get()

    async def go():
        async def sigterm():
            await asyncio.sleep(0.5)
            drain.begin()

        stopping = asyncio.ensure_future(sigterm())
        message = body(
            "tools/call",
            {
                "name": "profile",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {"input-1": {"action": "accept"}},
            },
            id=2,
        )
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await AsyncClient().post(
            "/mcp",
            json.dumps(message),
            content_type="application/json",
            headers=headers(token, "tools/call", "profile"),
        )
        raw = b"".join([chunk async for chunk in response.streaming_content])
        await stopping
        return raw, loop.time() - started

    try:
        raw, elapsed = async_to_sync(go)()
    finally:
        drain.reset()
    (final,) = parse_sse(raw)
    assert final["id"] == 2
    assert final["result"]["resultType"] == "input_required"
    (asked,) = final["result"]["inputRequests"].values()
    assert asked["params"]["url"] == row.url  # the same link
    assert 0.5 <= elapsed < 5
    row.refresh_from_db()
    assert row.status == Elicitation.Status.PENDING  # the user can still finish the page


@REGISTRY.tool
async def sample(ctx: ToolContext) -> str:
    result = await ctx.request_input(
        "sampling/createMessage",
        {"messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}], "maxTokens": 10},
    )
    return f"model said {result['content']['text']}"


def test_request_input_sampling_round_trip(client, token):
    caps = {"sampling": {}}
    first = result_of(call_tool(client, token, "sample", caps=caps))
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["input-1"]["method"] == "sampling/createMessage"
    answer = {"input-1": {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}}
    done = call_tool(
        client, token, "sample", id=2, caps=caps, requestState=first["requestState"], inputResponses=answer
    )
    assert result_of(done)["content"][0]["text"] == "model said 4"


def test_request_input_without_the_capability_is_32021(client, token):
    response = call_tool(client, token, "sample", caps={"elicitation": {"form": {}}})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize(
    ("params", "outcome"),
    [
        ({"_meta": None}, (400, -32602)),
        ({"_meta": []}, (400, -32602)),
        (
            {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": None,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
            (400, -32020),
        ),
        (
            {"_meta": {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": []}},
            (400, -32602),
        ),
        (
            {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": V,
                    "io.modelcontextprotocol/clientCapabilities": {"elicitation": "yes"},
                }
            },
            (400, -32602),
        ),
        ({"_meta": {**envelope(), "io.modelcontextprotocol/logLevel": "loud"}}, (400, -32602)),
        ({"_meta": {**envelope(), "progressToken": {"x": 1}}}, (400, -32602)),
        ({"name": "ask", "arguments": [], "_meta": envelope()}, (400, -32602)),
        ({"name": "ask", "arguments": {}, "requestState": None, "_meta": envelope()}, (200, "input_required")),
        (
            {"name": "ask", "arguments": {}, "requestState": "v1.x.y", "inputResponses": "no", "_meta": envelope()},
            (400, -32602),
        ),
        (
            {"name": "ask", "arguments": {}, "requestState": "v1.x.y", "inputResponses": [1], "_meta": envelope()},
            (400, -32602),
        ),
        (
            {
                "name": "ask",
                "arguments": {},
                "inputResponses": {"input-1": {"action": "accept", "content": {"name": "x"}}},
                "_meta": envelope(),
            },
            (200, "input_required"),
        ),
        ({"name": "\udcff", "arguments": {}, "_meta": envelope()}, (400, -32020)),
    ],
)
def test_hostile_modern_requests_never_cause_a_server_error(client, token, params, outcome):
    """Bad envelopes, arguments, states and answers: the ladder's 400s, or a fresh round (an
    absent or null requestState, answers without a state), never a server error."""
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    name = params.get("name") if isinstance(params.get("name"), str) else None
    h = headers(token, "tools/call", name.encode("utf-8", "replace").decode() if name else None)
    response = client.post("/mcp", json.dumps(message), content_type="application/json", headers=h)
    data = response.json()
    assert data["id"] == 7
    status, detail = outcome
    assert response.status_code == status, data
    if status == 400:
        assert data["error"]["code"] == detail
    else:
        assert data["result"]["resultType"] == detail


def _region(region: str, count: int = 1) -> str:
    return f"{region}:{count}"


REGISTRY.register(
    _region,
    name="regional",
    input_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
        },
        "required": ["region"],
    },
)


@pytest.mark.parametrize(
    ("arguments", "param_headers", "status"),
    [
        ({"region": "eu"}, {"Mcp-Param-Region": "eu"}, 200),
        ({"region": "eu", "count": 3}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "3"}, 200),
        ({"region": "eu", "count": 3}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "3.0"}, 200),
        (
            {"region": "日本"},
            {"Mcp-Param-Region": "=?base64?" + base64.b64encode("日本".encode()).decode() + "?="},
            200,
        ),
        ({"region": "eu"}, {"Mcp-Param-Region": " \teu \t"}, 200),  # RFC 9110 §5.5: OWS is not the value
        ({"region": " eu"}, {"Mcp-Param-Region": "=?base64?" + base64.b64encode(b" eu").decode() + "?="}, 200),
        ({"region": " eu"}, {"Mcp-Param-Region": " eu"}, 400),  # leading space of a value: base64 form only
        ({"region": "eu"}, {}, 400),
        ({"region": "eu"}, {"Mcp-Param-Region": "us"}, 400),
        ({"region": "eu"}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "1"}, 400),
        ({"region": "eu", "count": 3}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "4"}, 400),
    ],
)
def test_mcp_param_headers_mirror_annotated_arguments(client, token, arguments, param_headers, status):
    message = body("tools/call", {"name": "regional", "arguments": arguments})
    response = client.post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={**headers(token, "tools/call", "regional"), **param_headers},
    )
    assert response.status_code == status, response.content
    if status == 400:
        assert error_of(response)["code"] == -32020
    else:
        assert result_of(response)["resultType"] == "complete"
