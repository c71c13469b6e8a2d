"""Resource contents (mcp_oauth.mcp_server.registry.contents): reader return values become contents; the size limit counts raw bytes."""

from __future__ import annotations

import base64

import mcp_types as types
import pytest

from mcp_oauth.mcp_server.registry.resources import ResourceRegistry, to_contents
from mcp_oauth.mcp_server.transport.jsonrpc import McpError
from tests.mcp_oauth.mcp_server.registry.test_uritemplate import CTX, run


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
