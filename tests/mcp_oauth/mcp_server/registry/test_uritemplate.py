"""Unit tests of mcp_oauth.mcp_server.registry: URI templates, registration rules, value conversions."""

from __future__ import annotations

import asyncio
import base64
import uuid

import mcp_types as types
import pytest

from mcp_oauth.mcp_server.registry.completions import to_completion
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry, to_messages
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry, check_uri, to_contents
from mcp_oauth.mcp_server.registry.uritemplate import InvalidTemplate, UriTemplate
from mcp_oauth.mcp_server.transport.jsonrpc import McpError

CTX = RequestContext(user=None, scopes=frozenset({"mcp"}))


def run(coro):
    return asyncio.run(coro)


# --- RFC 6570 levels 1-2 ---------------------------------------------------------------------


def test_simple_expansion_encodes_reserved_characters_and_matching_decodes_them():
    template = UriTemplate("files://{owner}/{name}")
    assert template.variables == ("owner", "name")
    uri = template.expand({"owner": "a b", "name": "x/y?"})
    assert uri == "files://a%20b/x%2Fy%3F"
    assert template.match(uri) == {"owner": "a b", "name": "x/y?"}
    assert template.match("files://a/b/c") is None  # a simple variable never spans "/"
    assert template.match("files://a/") is None  # nor is it empty
    assert template.match("other://a/b") is None


def test_reserved_and_fragment_expansion():
    reserved = UriTemplate("docs://{+path}")
    assert reserved.expand({"path": "a/b c"}) == "docs://a/b%20c"
    assert reserved.match("docs://guides/intro/setup.md") == {"path": "guides/intro/setup.md"}
    fragment = UriTemplate("page://home{#section}")
    assert fragment.expand({"section": "top/1"}) == "page://home#top/1"
    assert fragment.match("page://home#top/1") == {"section": "top/1"}


def test_one_reserved_expression_matches_long_uris():
    template = UriTemplate("x://{a}/{b}/{+rest}")
    assert template.match("x://1/2/" + "r/" * 1000) == {"a": "1", "b": "2", "rest": "r/" * 1000}
    assert template.match("x://" + "/" * 2040 + "q") is None


def test_literal_template_and_undecodable_escape():
    assert UriTemplate("a://b").is_literal
    assert UriTemplate("x://{v}").match("x://%FF") is None  # not UTF-8


@pytest.mark.parametrize(
    "template",
    [
        "x://{a,b}",
        "x://{.a}",
        "x://{/a}",
        "x://{?q}",
        "x://{a*}",
        "x://{a:3}",
        "x://{a}{b}",
        "x://{a}/{a}",
        "x://{",
        "x://}",
        "x://{}",
        "",
        "x://{+a}/{+b}",
        "x://{+a}/x{#b}",
    ],
)
def test_level_three_and_malformed_templates_are_refused(template):
    with pytest.raises(InvalidTemplate):
        UriTemplate(template)


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        (123, "must be a string"),
        ("", "is empty"),
        ("no-scheme", "no scheme"),
        ("a://b c", "whitespace"),
        ("a://b\x00", "control"),
        ("a://" + "x" * 3000, "longer than 2048"),
        ("a://" + "é" * 1100, "longer than 2048 bytes"),
    ],
)
def test_malformed_uris(uri, reason):
    with pytest.raises(McpError) as caught:
        check_uri(uri)
    assert caught.value.code == -32602
    assert caught.value.message.startswith("Malformed resource URI") and reason in caught.value.message


# --- resources -------------------------------------------------------------------------------


def test_registration_rules():
    registry = ResourceRegistry("t")
    registry.register_resource(lambda: "x", "a://one", name="one")
    with pytest.raises(ValueError, match="already registered"):
        registry.register_resource(lambda: "x", "a://one", name="one")
    with pytest.raises(ValueError, match="is a URI template"):
        registry.register_resource(lambda: "x", "a://{id}", name="t")
    with pytest.raises(ValueError, match="invalid resource URI"):
        registry.register_resource(lambda: "x", "relative/path", name="r")
    with pytest.raises(ValueError, match="invalid scope"):
        registry.register_resource(lambda: "x", "a://two", name="two", scopes=['bad"scope'])
    with pytest.raises(ValueError, match="no parameter for the template variable 'id'"):
        registry.register_template(lambda ctx: "x", "a://{id}", name="t")
    with pytest.raises(ValueError, match="has no variable"):
        registry.register_template(lambda ctx: "x", "a://plain", name="t")
    with pytest.raises(ValueError, match="completer for unknown variable 'nope'"):
        registry.register_template(lambda ctx, id: "x", "a://{id}", name="t", completers={"nope": lambda c, v: []})
    with pytest.raises(ValueError, match="level 3"):
        registry.register_template(lambda ctx, id: "x", "a://{?id}", name="t")


def test_typed_template_parameters_are_converted_or_refused_naming_the_parameter():
    registry = ResourceRegistry("t")
    seen = {}

    @registry.resource_template("orders://{order_id}/items/{item}", name="item")
    def item(ctx, order_id: int, item: uuid.UUID) -> str:
        seen.update(order_id=order_id, item=item)
        return "ok"

    key = uuid.uuid4()
    contents = run(registry.read(CTX, f"orders://42/items/{key}"))
    assert contents[0].text == "ok" and seen == {"order_id": 42, "item": key}
    with pytest.raises(McpError) as caught:
        run(registry.read(CTX, f"orders://forty/items/{key}"))
    assert caught.value.code == -32602
    assert (
        caught.value.message
        == "Invalid resource URI orders://forty/items/" + str(key) + ": parameter 'order_id' must be int, got 'forty'"
    )
    with pytest.raises(McpError) as caught:
        run(registry.read(CTX, "orders://1/items/not-a-uuid"))
    assert "parameter 'item' must be UUID" in caught.value.message


def test_return_values_become_contents():
    assert to_contents("a://x", None, "hi")[0] == types.TextResourceContents(
        uri="a://x", mime_type="text/plain", text="hi"
    )
    blob = to_contents("a://x", "image/png", b"\x89PNG")[0]
    assert blob.mime_type == "image/png" and base64.b64decode(blob.blob) == b"\x89PNG"
    as_json = to_contents("a://x", None, {"a": [1, 2]})[0]
    assert as_json.mime_type == "application/json" and as_json.text == '{"a": [1, 2]}'
    given = types.TextResourceContents(uri="a://x#1", text="part")
    assert to_contents("a://x", None, [given, given]) == [given, given]


def test_size_limit_counts_raw_bytes():
    registry = ResourceRegistry("t")
    registry.register_resource(lambda: "é" * 6, "a://text", name="text", max_bytes=12)
    registry.register_resource(lambda: "é" * 7, "a://big", name="big", max_bytes=12)
    registry.register_resource(lambda: b"\x00" * 13, "a://blob", name="blob", max_bytes=12)
    assert run(registry.read(CTX, "a://text"))[0].text == "é" * 6
    with pytest.raises(McpError) as caught:
        run(registry.read(CTX, "a://big"))
    assert caught.value.message == "Resource too large: a://big is 14 bytes, the limit is 12 bytes"
    with pytest.raises(McpError) as caught:
        run(registry.read(CTX, "a://blob"))
    assert caught.value.message == "Resource too large: a://blob is 13 bytes, the limit is 12 bytes"


def test_none_from_a_reader_is_not_found_like_an_unknown_uri():
    registry = ResourceRegistry("t")
    registry.register_template(lambda ctx, id: None, "rows://{id}", name="rows")
    messages = []
    for uri in ("rows://1", "unknown://1"):
        with pytest.raises(McpError) as caught:
            run(registry.read(CTX, uri))
        messages.append((caught.value.code, caught.value.message.replace(uri, "<uri>")))
    assert messages == [(-32602, "Resource not found: <uri>")] * 2


def test_list_pages_span_static_resources_and_template_listers():
    registry = ResourceRegistry("t")
    for index in range(3):
        registry.register_resource(lambda: "x", f"s://{index}", name=f"s{index}")
    registry.register_template(
        lambda ctx, id: "x",
        "rows://{id}",
        name="rows",
        lister=lambda ctx: [{"uri": f"rows://{i}", "name": f"row {i}"} for i in range(4)],
    )
    registry.register_resource(lambda: "x", "hidden://x", name="hidden", scopes=["admin"])
    uris, offset = [], 0
    while offset is not None:
        page, offset = run(registry.list_page(CTX, offset, 2))
        assert len(page) <= 2
        uris.extend(entry.uri for entry in page)
    assert uris == ["s://0", "s://1", "s://2", "rows://0", "rows://1", "rows://2", "rows://3"]


# --- prompts and completion -------------------------------------------------------------------


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


def test_completion_caps_values_at_100_with_total_and_has_more():
    completion = to_completion([str(i) for i in range(150)])
    assert len(completion.values) == 100 and completion.total == 150 and completion.has_more is True
    small = to_completion(["a"])
    assert small.values == ["a"] and small.total == 1 and small.has_more is False
    with pytest.raises(TypeError):
        to_completion("abc")
    with pytest.raises(TypeError):
        to_completion([1, 2])


# --- settings and system checks ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "code"), [("RESOURCE_REGISTRY", "mcp_oauth.E023"), ("PROMPT_REGISTRY", "mcp_oauth.E024")]
)
@pytest.mark.parametrize(
    "path", ["no.such.module.registry", "mcp_oauth.settings.DEFAULTS", "mcp_oauth.mcp_server.tools.registry"]
)
def test_bad_resource_or_prompt_registry_is_an_error(settings, key, code, path):
    from mcp_oauth.checks import check_resource_and_prompt_registries

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, key: path}
    assert [message.id for message in check_resource_and_prompt_registries(None)] == [code]


def test_default_registries_pass_the_checks():
    from django.core.checks import run_checks

    from mcp_oauth.checks import check_resource_and_prompt_registries

    assert check_resource_and_prompt_registries(None) == []
    assert not {m.id for m in run_checks()} & {"mcp_oauth.E023", "mcp_oauth.E024"}


def test_demo_modules_are_autodiscovered():
    from mcp_oauth.mcp_server.registry.prompts import registry as prompts
    from mcp_oauth.mcp_server.registry.resources import registry as resources

    assert resources.get_resource("demo://readme") is not None
    assert resources.get_template("notes://{pk}") is not None
    assert "summarize_note" in prompts
