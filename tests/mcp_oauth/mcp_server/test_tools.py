"""The tool registry (``mcp_oauth.mcp_server.tools``): registration, schemas, argument validation, calls, results.

Endpoint behaviour (tools/list, tools/call over HTTP, scopes) is in ``test_transport.py``.
"""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace
from typing import Annotated, Literal

import mcp_types as types
import pytest
from asgiref.sync import async_to_sync
from pydantic import BaseModel, Field

from mcp_oauth.mcp_server.tools import (
    InvalidArguments,
    McpError,
    Tool,
    ToolContext,
    ToolError,
    ToolRegistry,
    to_call_tool_result,
)
from mcp_oauth.mcp_server.tools import (
    registry as default_registry,
)
from mcp_oauth.mcp_server.tools import (
    tool as default_tool,
)


def make_ctx(**overrides) -> ToolContext:
    """A ToolContext without a database: principal and session are stand-ins."""
    principal = SimpleNamespace(
        user="alice", application="app", client_id="client-1", scopes=frozenset({"mcp"}), resource="res"
    )
    session = SimpleNamespace(pk="sid", client_capabilities={"elicitation": {}}, log_level="")
    values = dict(principal=principal, session=session, request=None, request_id=1, protocol_version="2025-11-25")
    values.update(overrides)
    return ToolContext(**values)


def call(tool: Tool, arguments: dict, ctx: ToolContext | None = None) -> types.CallToolResult:
    return async_to_sync(tool.call)(ctx or make_ctx(), tool.validate_arguments(arguments))


# --- registration ------------------------------------------------------------------------


def test_defaults_come_from_the_function():
    reg = ToolRegistry()

    def lookup(ctx, city: str) -> str:
        """Look a city up."""
        return city

    t = reg.register(lookup)
    assert (t.name, t.title, t.description, t.scopes) == ("lookup", None, "Look a city up.", ())
    assert reg.get("lookup") is t and "lookup" in reg and len(reg) == 1
    assert reg.get("missing") is None and reg.get(None) is None


def test_options_override_defaults():
    reg = ToolRegistry()
    t = reg.register(
        lambda: "x",
        name="my.tool-1",
        title="My tool",
        description="Explicit.",
        scopes=["mcp", "profile", "mcp"],
        annotations={"readOnlyHint": True, "openWorldHint": False},
        meta={"vendor/x": 1},
    )
    definition = t.definition().model_dump(by_alias=True, exclude_none=True, mode="json")
    assert definition["name"] == "my.tool-1"
    assert definition["title"] == "My tool"
    assert definition["description"] == "Explicit."
    assert definition["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert definition["_meta"] == {"vendor/x": 1}
    assert t.scopes == ("mcp", "profile")


def test_decorator_forms_return_the_function_unchanged():
    reg = ToolRegistry()

    @reg.tool
    def bare() -> str:
        return "bare"

    @reg.tool(name="named", scopes=["mcp"])
    def with_options() -> str:
        return "opts"

    assert bare() == "bare" and with_options() == "opts"
    assert [t.name for t in reg.list()] == ["bare", "named"]
    assert [t.name for t in reg] == ["bare", "named"]
    assert reg.get("named").scopes == ("mcp",)


def test_module_level_shortcut_is_the_default_registry():
    assert default_tool.__self__ is default_registry


def test_duplicate_names_are_refused():
    reg = ToolRegistry()
    reg.register(lambda: None, name="dup")
    with pytest.raises(ValueError, match="already registered"):
        reg.register(lambda: None, name="dup")


@pytest.mark.parametrize("name", ["", "has space", "comma,name", "x" * 129, "ünïcode", "slash/name", "<lambda>"])
def test_invalid_names_are_refused(name):
    with pytest.raises(ValueError, match="invalid tool name"):
        ToolRegistry().register(lambda: None, name=name or None)


@pytest.mark.parametrize("scope", ["has space", 'quo"te', "", "back\\slash"])
def test_invalid_scopes_are_refused(scope):
    with pytest.raises(ValueError, match="invalid scope"):
        ToolRegistry().register(lambda: None, name="t", scopes=[scope])


def test_unregister():
    reg = ToolRegistry()
    reg.register(lambda: None, name="gone")
    assert reg.unregister("gone").name == "gone"
    assert reg.get("gone") is None
    with pytest.raises(KeyError):
        reg.unregister("gone")


# --- input schemas -----------------------------------------------------------------------


def test_schema_from_type_hints_excludes_the_context():
    reg = ToolRegistry()

    def search(
        ctx: ToolContext,
        query: str,
        limit: Annotated[int, Field(ge=1, le=50, description="How many")] = 10,
        kind: Literal["a", "b"] = "a",
    ) -> list:
        return []

    schema = reg.register(search).input_schema
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"query", "limit", "kind"}
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["limit"] == {
        "default": 10,
        "description": "How many",
        "maximum": 50,
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    assert schema["properties"]["kind"]["enum"] == ["a", "b"]


def test_context_found_by_annotation_anywhere_or_by_name_first():
    reg = ToolRegistry()

    def annotated_later(x: int, context: ToolContext) -> int:
        return x

    def named_first(ctx, x: int) -> int:
        return x

    def no_context(x: int) -> int:
        return x

    assert reg.register(annotated_later).context_param == "context"
    assert reg.register(named_first).context_param == "ctx"
    assert reg.register(no_context).context_param is None
    for name in ("annotated_later", "named_first", "no_context"):
        assert list(reg.get(name).input_schema["properties"]) == ["x"]


def test_parameter_names_that_shadow_pydantic_attributes_work():
    reg = ToolRegistry()

    def shadow(json: str, schema: int, model_config: str = "c") -> str:
        return f"{json}-{schema}-{model_config}"

    t = reg.register(shadow)
    assert set(t.input_schema["properties"]) == {"json", "schema", "model_config"}
    result = call(t, {"json": "j", "schema": 2})
    assert result.content[0].text == "j-2-c"


class Point(BaseModel):
    x: int
    y: int


def test_nested_pydantic_model_argument():
    reg = ToolRegistry()

    def norm(p: Point) -> int:
        assert isinstance(p, Point)
        return abs(p.x) + abs(p.y)

    t = reg.register(norm)
    assert "$defs" in t.input_schema
    assert call(t, {"p": {"x": -2, "y": 3}}).content[0].text == "5"
    with pytest.raises(InvalidArguments) as excinfo:
        t.validate_arguments({"p": {"x": "no"}})
    fields = {error["field"] for error in excinfo.value.errors}
    assert fields == {"p.x", "p.y"}


def test_unresolvable_or_unsupported_hints_are_refused_at_registration():
    def forward(x: NoSuchType) -> None:  # noqa: F821
        return None

    def arbitrary(x: threading.Lock) -> None:
        return None

    with pytest.raises(ValueError, match="cannot resolve the type hints"):
        ToolRegistry().register(forward)
    with pytest.raises(ValueError, match="cannot derive an input schema"):
        ToolRegistry().register(arbitrary)


def test_var_args_need_an_explicit_schema():
    with pytest.raises(ValueError, match="explicit input_schema"):
        ToolRegistry().register(lambda *args: None, name="varargs")
    with pytest.raises(ValueError, match="explicit input_schema"):
        ToolRegistry().register(lambda **kwargs: None, name="varkw")
    t = ToolRegistry().register(
        lambda **kwargs: sorted(kwargs), name="ok", input_schema={"type": "object", "properties": {}}
    )
    assert t.input_validator is not None


def test_pydantic_validation_lists_every_bad_field():
    reg = ToolRegistry()

    def f(a: int, b: str, c: bool = False) -> None:
        return None

    t = reg.register(f)
    with pytest.raises(InvalidArguments) as excinfo:
        t.validate_arguments({"a": "not a number", "c": "maybe", "zzz": 1})
    errors = {error["field"]: error["message"] for error in excinfo.value.errors}
    assert set(errors) == {"a", "b", "c", "zzz"}
    assert "valid integer" in errors["a"] and errors["b"] == "Field required"
    message = str(excinfo.value)
    assert message.startswith("Invalid arguments for tool 'f': ")
    for field_name in ("a:", "b:", "c:", "zzz:"):
        assert field_name in message


def test_pydantic_validation_coerces_and_fills_defaults():
    reg = ToolRegistry()

    def f(a: int, b: str = "dflt") -> None:
        return None

    assert reg.register(f).validate_arguments({"a": "7"}) == {"a": 7, "b": "dflt"}
    with pytest.raises(InvalidArguments):
        reg.get("f").validate_arguments(None)


def test_explicit_schema_is_checked_at_registration():
    reg = ToolRegistry()
    with pytest.raises(ValueError, match="invalid input_schema"):
        reg.register(lambda: None, name="bad", input_schema={"type": "object", "properties": {"a": {"type": 5}}})
    with pytest.raises(ValueError, match='"type": "object"'):
        reg.register(lambda: None, name="notobj", input_schema={"type": "array"})
    with pytest.raises(ValueError, match="must be a JSON Schema object"):
        reg.register(lambda: None, name="notdict", input_schema=["type", "object"])


def test_explicit_schema_validates_arguments_with_jsonschema():
    reg = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}, "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["n"],
        "additionalProperties": False,
    }

    def f(n: int, tags: list | None = None) -> str:
        return f"{n}:{tags}"

    t = reg.register(f, input_schema=schema)
    assert t.input_schema is schema
    with pytest.raises(InvalidArguments) as excinfo:
        t.validate_arguments({"n": 0, "tags": ["ok", 3], "extra": True})
    fields = sorted(error["field"] for error in excinfo.value.errors)
    assert fields == ["", "n", "tags.1"]
    assert call(t, {"n": 2, "tags": ["x"]}).content[0].text == "2:['x']"


def test_huge_bad_value_does_not_blow_up_the_message():
    reg = ToolRegistry()
    t = reg.register(lambda n: n, name="n", input_schema={"type": "object", "properties": {"n": {"type": "integer"}}})
    with pytest.raises(InvalidArguments) as excinfo:
        t.validate_arguments({"n": "x" * 100_000})
    assert len(str(excinfo.value)) < 500


# --- output schemas ----------------------------------------------------------------------


class Weather(BaseModel):
    city: str
    celsius: float


def test_output_schema_from_pydantic_return_annotation_and_structured_result():
    reg = ToolRegistry()

    def weather(city: str) -> Weather:
        return Weather(city=city, celsius=21.5)

    t = reg.register(weather)
    assert t.output_schema["properties"]["celsius"]["type"] == "number"
    result = call(t, {"city": "Oslo"})
    assert not result.is_error
    assert result.structured_content == {"city": "Oslo", "celsius": 21.5}
    assert json.loads(result.content[0].text) == {"city": "Oslo", "celsius": 21.5}


def test_output_not_matching_the_output_schema_is_an_error_result():
    reg = ToolRegistry()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    t = reg.register(lambda: {"n": "not an int"}, name="bad_out", output_schema=schema)
    result = call(t, {})
    assert result.is_error
    assert "output schema" in result.content[0].text
    t2 = reg.register(lambda: "plain text", name="text_out", output_schema=schema)
    assert call(t2, {}).is_error
    t3 = reg.register(lambda: {"n": 3}, name="good_out", output_schema=schema)
    assert call(t3, {}).structured_content == {"n": 3}


def test_invalid_output_schema_is_refused():
    with pytest.raises(ValueError, match="output_schema"):
        ToolRegistry().register(lambda: None, name="x", output_schema={"type": "string"})


# --- results -----------------------------------------------------------------------------


def test_to_call_tool_result_conversions():
    text = to_call_tool_result("hi")
    assert [c.text for c in text.content] == ["hi"] and text.structured_content is None

    as_dict = to_call_tool_result({"a": 1, "b": [1, 2]})
    assert as_dict.structured_content == {"a": 1, "b": [1, 2]}
    assert json.loads(as_dict.content[0].text) == {"a": 1, "b": [1, 2]}

    as_list = to_call_tool_result([1, "two"])
    assert as_list.structured_content is None and json.loads(as_list.content[0].text) == [1, "two"]

    assert to_call_tool_result(None).content == []
    assert to_call_tool_result(42).content[0].text == "42"
    assert to_call_tool_result([]).content[0].text == "[]"

    image = types.ImageContent(data="aGk=", mime_type="image/png")
    assert to_call_tool_result(image).content == [image]
    blocks = [types.TextContent(text="a"), image]
    assert to_call_tool_result(blocks).content == blocks

    explicit = types.CallToolResult(content=[], is_error=True)
    assert to_call_tool_result(explicit) is explicit

    model = to_call_tool_result(Weather(city="Rome", celsius=30))
    assert model.structured_content == {"city": "Rome", "celsius": 30.0}


def test_unserialisable_return_is_an_error_result():
    t = ToolRegistry().register(lambda: object(), name="obj")
    result = call(t, {})
    assert result.is_error and "cannot be sent" in result.content[0].text


def test_tool_error_message_is_shown_other_exceptions_are_not():
    reg = ToolRegistry()

    def refuse() -> str:
        raise ToolError("The city is not known.")

    def crash() -> str:
        raise RuntimeError("secret database password in message")

    assert call(reg.register(refuse), {}).content[0].text == "The city is not known."
    result = call(reg.register(crash), {})
    assert result.is_error
    assert "secret" not in result.content[0].text and "internal error" in result.content[0].text


def test_mcp_error_propagates():
    def needs_url() -> str:
        raise McpError(-32042, "URL elicitation required", {"elicitations": []})

    t = ToolRegistry().register(needs_url)
    with pytest.raises(McpError) as excinfo:
        call(t, {})
    assert excinfo.value.to_error() == {
        "code": -32042,
        "message": "URL elicitation required",
        "data": {"elicitations": []},
    }


@pytest.mark.django_db
def test_sync_tools_run_in_a_worker_thread_async_tools_in_the_loop():
    seen = {}
    reg = ToolRegistry()

    def sync_tool(ctx) -> str:
        seen["sync"] = threading.current_thread()
        return ctx.client_id

    async def async_tool(ctx: ToolContext, n: int) -> dict:
        seen["async"] = threading.current_thread()
        return {"n": n, "user": ctx.user, "scopes": sorted(ctx.scopes)}

    assert call(reg.register(sync_tool), {}).content[0].text == "client-1"
    result = call(reg.register(async_tool), {"n": 3})
    assert result.structured_content == {"n": 3, "user": "alice", "scopes": ["mcp"]}
    assert seen["sync"] is not seen["async"]


def test_context_helpers_without_a_stream_drop_silently():
    ctx = make_ctx(progress_token="tok")
    assert not ctx.streaming
    assert async_to_sync(ctx.send_notification)("notifications/x") is False
    assert async_to_sync(ctx.report_progress)(1, 2) is False
    assert async_to_sync(ctx.log)("info", "hello") is False
    with pytest.raises(ValueError, match="unknown log level"):
        async_to_sync(ctx.log)("loud", "x")
    with pytest.raises(RuntimeError, match="streaming"):
        async_to_sync(ctx.send_request)("ping")


def test_context_helpers_with_a_stream():
    sent: list[dict] = []

    async def sink(message):
        sent.append(message)

    ctx = make_ctx(progress_token="tok", sink=sink)
    ctx.session.log_level = "warning"

    async def go():
        assert await ctx.report_progress(1, 4, "a quarter")
        assert not await ctx.log("info", "below the session level")
        assert await ctx.log("error", {"k": "v"}, logger_name="db")
        assert await ctx.send_notification("notifications/custom", {"x": 1})

    async_to_sync(go)()
    assert sent == [
        {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "tok", "progress": 1, "total": 4, "message": "a quarter"},
        },
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "error", "data": {"k": "v"}, "logger": "db"},
        },
        {"jsonrpc": "2.0", "method": "notifications/custom", "params": {"x": 1}},
    ]
    assert async_to_sync(make_ctx(sink=sink).report_progress)(1) is False


def test_context_shortcuts():
    ctx = make_ctx()
    assert (ctx.user, ctx.application, ctx.client_id, ctx.resource) == ("alice", "app", "client-1", "res")
    assert ctx.scopes == frozenset({"mcp"})
    assert ctx.client_capabilities == {"elicitation": {}}
