"""``request_inputs``: several inputs per round under caller-chosen keys (MCP 2026-07-28 SEP-2322).

Tools, prompt renderers and resource readers ask the client with one API in both eras: on
2026-07-28 an ``input_required`` result whose sealed ``requestState`` is bound to the method, the
tool / prompt name or URI and the arguments; on 2025-11-25 live server-to-client requests on the
streamed response.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient, AsyncRequestFactory, Client

from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.tools import InputRequest, ToolContext, ToolRegistry
from mcp_oauth.mcp_server.transport.views import McpView
from tests.mcp_oauth.mcp_server.transport.test_views import asgi, async_initialize, mcp_headers, parse_sse, read_events

REGISTRY = ToolRegistry("input-required-tests")
V = "2026-07-28"
ALL_CAPS = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
NAME = {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}, "required": ["name"]}
COLOR = {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
QUESTION = [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}]


@REGISTRY.tool
async def trio(ctx: ToolContext, suffix: str = "") -> str:
    answers = await ctx.request_inputs(
        {
            "user_name": InputRequest.elicit("Name?", NAME),
            "capital": InputRequest.sample(QUESTION, 20),
            "client_roots": InputRequest.roots(),
        }
    )
    roots = ",".join(root["uri"] for root in answers["client_roots"]["roots"])
    return f"{answers['user_name']['content']['name']}|{answers['capital']['content']['text']}|{roots}{suffix}"


@REGISTRY.tool
async def steps(ctx: ToolContext) -> str:
    first = await ctx.request_inputs({"step1": InputRequest.elicit("Name?", NAME)})
    second = await ctx.request_inputs({"step2": InputRequest.elicit("Colour?", COLOR)})
    return f"{first['step1']['content']['name']} likes {second['step2']['content']['color']}"


@REGISTRY.tool
async def tags(ctx: ToolContext, labels: Any) -> str:
    labels["seen"] = True  # a tool that changes its (container) argument before asking
    answers = await ctx.request_inputs({"user_name": InputRequest.elicit("Name?", NAME)})
    return f"{answers['user_name']['content']['name']}:{','.join(sorted(labels))}"


PROMPTS = PromptRegistry("input-required-tests")
RESOURCES = ResourceRegistry("input-required-tests")


@PROMPTS.prompt
async def briefing(ctx, topic: str) -> str:
    answers = await ctx.request_inputs({"user_context": InputRequest.elicit("Context?", NAME)})
    return f"{topic} for {answers['user_context']['content']['name']}"


@RESOURCES.resource("notes://asked", name="asked")
async def asked_note(ctx) -> str:
    answers = await ctx.request_inputs({"client_roots": InputRequest.roots()})
    return "roots: " + ",".join(root["uri"] for root in answers["client_roots"]["roots"])


@pytest.fixture(autouse=True)
def _registries(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.mcp_server.transport.test_input_required.REGISTRY",
        "PROMPT_REGISTRY": PROMPTS,
        "RESOURCE_REGISTRY": RESOURCES,
    }


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


@pytest.fixture
def client():
    return Client()


def rpc(client, token, method, params, *, id=1, caps=ALL_CAPS):
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
    }
    name = params.get("uri") if method == "resources/read" else params.get("name")
    if name is not None:
        headers["Mcp-Name"] = name
    response = client.post("/mcp", json.dumps(message), content_type="application/json", headers=headers)
    return response.status_code, response.json()


def accept(**content) -> dict:
    return {"action": "accept", "content": content}


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}


def test_several_inputs_in_one_round_under_the_callers_keys(client, token):
    status, first = rpc(client, token, "tools/call", {"name": "trio", "arguments": {}})
    assert status == 200
    result = first["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {
        "user_name": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "Name?", "requestedSchema": NAME},
        },
        "capital": {"method": "sampling/createMessage", "params": {"messages": QUESTION, "maxTokens": 20}},
        "client_roots": {"method": "roots/list", "params": {}},
    }
    answers = {"user_name": accept(name="Ada"), "capital": SAMPLED, "client_roots": ROOTS}
    status, done = rpc(
        client,
        token,
        "tools/call",
        {"name": "trio", "arguments": {}, "inputResponses": answers, "requestState": result["requestState"]},
        id=2,
    )
    assert status == 200
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["content"] == [{"type": "text", "text": "Ada|Paris|file:///work"}]


def test_a_missing_or_invalid_answer_is_asked_again_and_the_others_are_kept(client, token):
    _, first = rpc(client, token, "tools/call", {"name": "trio", "arguments": {}})
    # name violates the schema (minLength), roots missing, an unknown key: only those two are asked again
    partial = {"user_name": accept(name=""), "capital": SAMPLED, "stray": accept(x=1)}
    status, second = rpc(
        client,
        token,
        "tools/call",
        {
            "name": "trio",
            "arguments": {},
            "inputResponses": partial,
            "requestState": first["result"]["requestState"],
        },
        id=2,
    )
    assert status == 200
    assert second["result"]["resultType"] == "input_required"
    assert sorted(second["result"]["inputRequests"]) == ["client_roots", "user_name"]
    # the settled sampling answer travels in the new state: the client need not repeat it
    rest = {"user_name": accept(name="Bo"), "client_roots": ROOTS}
    _, third = rpc(
        client,
        token,
        "tools/call",
        {"name": "trio", "arguments": {}, "inputResponses": rest, "requestState": second["result"]["requestState"]},
        id=3,
    )
    assert third["result"]["content"][0]["text"] == "Bo|Paris|file:///work"


def test_a_retry_without_the_answer_gets_input_required_not_an_error(client, token):
    _, first = rpc(client, token, "tools/call", {"name": "steps", "arguments": {}})
    status, again = rpc(
        client,
        token,
        "tools/call",
        {
            "name": "steps",
            "arguments": {},
            "inputResponses": {"wrong_key": accept(name="x")},
            "requestState": first["result"]["requestState"],
        },
        id=2,
    )
    assert status == 200
    assert list(again["result"]["inputRequests"]) == ["step1"]
    assert again["result"]["requestState"] != first["result"]["requestState"]


def test_multi_round_asks_step_by_step_with_a_new_state_each_round(client, token):
    _, r1 = rpc(client, token, "tools/call", {"name": "steps", "arguments": {}})
    assert list(r1["result"]["inputRequests"]) == ["step1"]
    _, r2 = rpc(
        client,
        token,
        "tools/call",
        {
            "name": "steps",
            "arguments": {},
            "inputResponses": {"step1": accept(name="Ada")},
            "requestState": r1["result"]["requestState"],
        },
        id=2,
    )
    assert list(r2["result"]["inputRequests"]) == ["step2"]
    assert r2["result"]["inputRequests"]["step2"]["params"]["message"] == "Colour?"
    _, r3 = rpc(
        client,
        token,
        "tools/call",
        {
            "name": "steps",
            "arguments": {},
            "inputResponses": {"step2": accept(color="blue")},
            "requestState": r2["result"]["requestState"],
        },
        id=3,
    )
    assert r3["result"]["content"][0]["text"] == "Ada likes blue"
    # each state opens once
    status, replay = rpc(
        client,
        token,
        "tools/call",
        {
            "name": "steps",
            "arguments": {},
            "inputResponses": {"step2": accept(color="red")},
            "requestState": r2["result"]["requestState"],
        },
        id=4,
    )
    assert status == 400 and replay["error"]["code"] == -32602


def test_undeclared_capabilities_are_32021_naming_each(client, token):
    status, body = rpc(client, token, "tools/call", {"name": "trio", "arguments": {}}, caps={"sampling": {}})
    assert status == 400
    assert body["error"]["code"] == -32021
    assert body["error"]["data"] == {"requiredCapabilities": {"elicitation": {}, "roots": {}}}


def test_the_state_is_bound_to_the_arguments(client, token):
    _, first = rpc(client, token, "tools/call", {"name": "trio", "arguments": {}})
    answers = {"user_name": accept(name="Ada"), "capital": SAMPLED, "client_roots": ROOTS}
    status, body = rpc(
        client,
        token,
        "tools/call",
        {
            "name": "trio",
            "arguments": {"suffix": "!"},
            "inputResponses": answers,
            "requestState": first["result"]["requestState"],
        },
        id=2,
    )
    assert status == 400 and body["error"]["code"] == -32602


def test_the_state_binds_the_arguments_as_sent_even_when_the_tool_changes_them(client, token):
    """A first round's binding is computed only when the tool asks; a container argument is
    digested before the tool runs (the tool may change it in place)."""
    params = {"name": "tags", "arguments": {"labels": {"a": 1}}}
    status, first = rpc(client, token, "tools/call", params)
    assert status == 200 and first["result"]["resultType"] == "input_required"
    answers = {"user_name": accept(name="Ada")}
    state = first["result"]["requestState"]
    status, done = rpc(client, token, "tools/call", {**params, "inputResponses": answers, "requestState": state}, id=2)
    assert status == 200, done
    assert done["result"]["content"][0]["text"] == "Ada:a,seen"


def test_prompts_get_returns_input_required_then_the_prompt(client, token):
    params = {"name": "briefing", "arguments": {"topic": "Weather"}}
    status, first = rpc(client, token, "prompts/get", params)
    assert status == 200
    assert first["result"]["resultType"] == "input_required"
    assert list(first["result"]["inputRequests"]) == ["user_context"]
    state = first["result"]["requestState"]
    status, done = rpc(
        client,
        token,
        "prompts/get",
        {**params, "inputResponses": {"user_context": accept(name="Ada")}, "requestState": state},
        id=2,
    )
    assert status == 200
    assert done["result"]["resultType"] == "complete"
    assert done["result"]["messages"] == [{"role": "user", "content": {"type": "text", "text": "Weather for Ada"}}]


@pytest.mark.parametrize("attack", ["tampered", "other_arguments", "from_a_tool"])
def test_prompts_get_refuses_a_bad_state_with_32602(client, token, attack):
    params = {"name": "briefing", "arguments": {"topic": "Weather"}}
    _, first = rpc(client, token, "prompts/get", params)
    state = first["result"]["requestState"]
    if attack == "tampered":
        state = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
    elif attack == "other_arguments":
        params = {"name": "briefing", "arguments": {"topic": "Stocks"}}
    else:  # a state sealed for tools/call
        _, tool_first = rpc(client, token, "tools/call", {"name": "steps", "arguments": {}}, id=9)
        state = tool_first["result"]["requestState"]
    status, body = rpc(
        client,
        token,
        "prompts/get",
        {**params, "inputResponses": {"user_context": accept(name="Ada")}, "requestState": state},
        id=2,
    )
    assert status == 400
    assert body["error"]["code"] == -32602


def test_resources_read_returns_input_required_then_the_contents(client, token):
    status, first = rpc(client, token, "resources/read", {"uri": "notes://asked"})
    assert status == 200
    assert first["result"]["resultType"] == "input_required"
    assert first["result"]["inputRequests"] == {"client_roots": {"method": "roots/list", "params": {}}}
    assert "ttlMs" not in first["result"]  # an input_required result is not cacheable
    status, done = rpc(
        client,
        token,
        "resources/read",
        {
            "uri": "notes://asked",
            "inputResponses": {"client_roots": ROOTS},
            "requestState": first["result"]["requestState"],
        },
        id=2,
    )
    assert status == 200
    assert done["result"]["contents"][0]["text"] == "roots: file:///work"
    assert done["result"]["cacheScope"] == "private"


# --- 2025-11-25: the same API sends live requests on the streamed response ---------------------


async def _answer_live(token, view, method, params, answers_by_method):
    factory = AsyncRequestFactory()
    session_id = await async_initialize(AsyncClient(), token)
    headers = mcp_headers(token, session_id)

    def post(message):
        return view(factory.post("/mcp", json.dumps(message), content_type="application/json", headers=headers))

    response = await post({"jsonrpc": "2.0", "id": 5, "method": method, "params": params})
    stream = response.streaming_content.__aiter__()
    asked = []
    for _ in answers_by_method:
        (event,) = await read_events(stream, 1)
        server_request = event["data"]
        asked.append(server_request["method"])
        answer = answers_by_method[server_request["method"]]
        answered = await post({"jsonrpc": "2.0", "id": server_request["id"], "result": answer})
        assert answered.status_code == 202
    rest = parse_sse(b"".join([chunk async for chunk in stream]))
    return asked, rest[-1]["data"]


def test_legacy_tool_request_inputs_sends_one_live_request_per_key(token):
    view = McpView.as_view(registry=REGISTRY)
    answers = {"elicitation/create": accept(name="Zed"), "sampling/createMessage": SAMPLED, "roots/list": ROOTS}
    asked, final = asgi(lambda: _answer_live(token, view, "tools/call", {"name": "trio"}, answers))
    assert asked == ["elicitation/create", "sampling/createMessage", "roots/list"]
    assert final["result"]["content"] == [{"type": "text", "text": "Zed|Paris|file:///work"}]


def test_legacy_prompts_get_asks_live_on_its_stream(token):
    view = McpView.as_view(registry=REGISTRY)
    params = {"name": "briefing", "arguments": {"topic": "Weather"}}
    asked, final = asgi(
        lambda: _answer_live(token, view, "prompts/get", params, {"elicitation/create": accept(name="Zed")})
    )
    assert asked == ["elicitation/create"]
    assert final["result"]["messages"][0]["content"]["text"] == "Weather for Zed"
