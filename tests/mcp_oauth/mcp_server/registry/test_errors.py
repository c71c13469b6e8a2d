"""Errors of the resource, prompt and completion methods (mcp_oauth.mcp_server.registry.errors): JSON-RPC codes, never a 500."""

from __future__ import annotations

import pytest

from tests.mcp_oauth.mcp_server.registry.test_handlers import HEADERS, Session, alice_token, registries  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def test_errors_have_json_rpc_codes_and_never_500(registries, alice_token):
    resources, prompts = registries

    def broken(ctx):
        raise RuntimeError("database exploded with secret detail")

    resources.register_resource(broken, "a://broken", name="broken")

    def sized(ctx, n: int) -> str:
        return "x" * n

    resources.register_template(sized, "sized://{n}", name="sized", max_bytes=10)
    prompts.register(lambda: 42, name="bad_prompt")
    prompts.register(lambda x: x, name="needs_x", completers={"x": lambda c, v: 7})
    session = Session(alice_token)

    error = session.error("resources/read", {"uri": "a://broken"})
    assert error == {"code": -32603, "message": "Internal error while serving resources/read"}
    error = session.error("resources/read", {"uri": "sized://11"})
    assert (
        error["code"] == -32602
        and error["message"] == "Resource too large: sized://11 is 11 bytes, the limit is 10 bytes"
    )
    assert error["data"] == {"uri": "sized://11", "size": 11, "limit": 10}
    error = session.error("resources/read", {"uri": "sized://ten"})
    assert error["message"] == "Invalid resource URI sized://ten: parameter 'n' must be int, got 'ten'"
    error = session.error("resources/read", {})
    assert error["code"] == -32602 and error["message"].startswith("Invalid params for resources/read: uri")
    error = session.error("prompts/get", {"name": "bad_prompt"})
    assert error == {"code": -32603, "message": "The prompt 'bad_prompt' produced an invalid result"}
    error = session.error("prompts/get", {"name": "nope"})
    assert (error["code"], error["message"]) == (-32602, "Unknown prompt: nope")
    error = session.error("prompts/get", {"name": "needs_x"})
    assert error["message"] == "Missing required argument(s) for prompt 'needs_x': x"
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "needs_x"}, "argument": {"name": "x", "value": ""}},
    )
    assert error == {"code": -32603, "message": "The completer of prompt 'needs_x' returned an invalid value"}
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/resource", "uri": "nope://{x}"}, "argument": {"name": "x", "value": ""}},
    )
    assert error["message"] == "Unknown resource template: nope://{x}"
    error = session.error(
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "needs_x"}, "argument": {"name": "y", "value": ""}},
    )
    assert error["message"] == "Unknown argument for prompt 'needs_x': y"
