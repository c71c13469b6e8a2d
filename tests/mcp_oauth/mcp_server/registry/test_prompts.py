"""The prompt registry (mcp_oauth.mcp_server.registry.prompts): arguments from the signature, argument errors naming every argument, messages from return values."""

from __future__ import annotations

import mcp_types as types
import pytest

from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry, to_messages
from mcp_oauth.mcp_server.transport.jsonrpc import McpError
from tests.mcp_oauth.mcp_server.registry.test_uritemplate import CTX, run


def test_prompt_arguments_come_from_the_signature():
    registry = PromptRegistry("t")

    @registry.prompt(arguments={"code": "The code"})
    def review(ctx: RequestContext, code: str, language: str = "python") -> str:
        "Review code."
        return f"{language}: {code}"

    definition = registry.get("review").definition()
    assert definition.description == "Review code."
    assert [(a.name, a.description, a.required) for a in definition.arguments] == [
        ("code", "The code", True),
        ("language", None, False),
    ]
    with pytest.raises(ValueError, match="descriptions for unknown arguments"):
        registry.register(lambda code: code, name="x", arguments={"nope": "?"})
    with pytest.raises(ValueError, match="completer for unknown argument"):
        registry.register(lambda code: code, name="y", completers={"nope": lambda c, v: []})
    with pytest.raises(ValueError, match="already registered"):
        registry.register(lambda: "", name="review")


def test_prompt_argument_errors_name_every_argument():
    registry = PromptRegistry("t")
    registry.register(lambda a, b, c="": f"{a}{b}{c}", name="p")
    item = registry.get("p")
    with pytest.raises(McpError) as caught:
        run(item.render(CTX, {"c": "1"}))
    assert caught.value.message == "Missing required argument(s) for prompt 'p': a, b"
    assert caught.value.data == {"prompt": "p", "missing": ["a", "b"]}
    with pytest.raises(McpError) as caught:
        run(item.render(CTX, {"a": "1", "b": "2", "zz": "3", "yy": "4"}))
    assert caught.value.message == "Unknown argument(s) for prompt 'p': yy, zz"
    assert run(item.render(CTX, {"a": "1", "b": "2"})).messages[0].content.text == "12"


def test_prompt_messages_from_return_values():
    image = types.ImageContent(data="AAAA", mime_type="image/png")
    messages, _ = to_messages(["hi", image, {"role": "assistant", "content": {"type": "text", "text": "ok"}}])
    assert [(m.role, m.content.type) for m in messages] == [("user", "text"), ("user", "image"), ("assistant", "text")]
    with pytest.raises(TypeError):
        to_messages(42)
