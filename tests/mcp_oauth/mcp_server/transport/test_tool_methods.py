"""tools/list and tools/call (mcp_oauth.mcp_server.transport.tool_methods): the list's shape and cursors, structured results, tool errors, argument validation, scopes (403 step-up), the tool_called signal."""

from __future__ import annotations

import json

from mcp_oauth.mcp_server.tools import ToolContext, ToolError
from mcp_oauth.signals import tool_called
from tests.mcp_oauth.mcp_server.transport.test_views import (  # noqa: F401 - fixtures
    ACCEPT_BOTH,
    INIT_PARAMS,
    REGISTRY,
    _registry,
    add,
    admin_only,
    client,
    crash,
    error_of,
    initialize,
    mcp_headers,
    needs_url,
    post,
    request,
    result_of,
    token,
)


@REGISTRY.tool
def greet(ctx: ToolContext, name: str) -> str:
    """Greet someone as the token's user."""
    return f"hello {name} from {ctx.user.get_username()} via {ctx.client_id}"


@REGISTRY.tool
def refuse() -> str:
    raise ToolError("I will not.")


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
