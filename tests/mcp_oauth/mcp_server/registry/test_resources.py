"""The resource registry (mcp_oauth.mcp_server.registry.resources): registration rules, typed template parameters, not found, list pages across static resources and template listers."""

from __future__ import annotations

import uuid

import pytest

from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.transport.jsonrpc import McpError
from tests.mcp_oauth.mcp_server.registry.test_uritemplate import CTX, run


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
