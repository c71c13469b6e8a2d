"""JSON-RPC framing at the MCP endpoint (mcp_oauth.mcp_server.transport.jsonrpc): parse errors, invalid requests, ids echoed only when readable."""

from __future__ import annotations

import pytest

from tests.mcp_oauth.mcp_server.transport.test_views import (  # noqa: F401 - fixtures
    ACCEPT_BOTH,
    _registry,
    client,
    error_of,
    mcp_headers,
    post,
    token,
)


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
