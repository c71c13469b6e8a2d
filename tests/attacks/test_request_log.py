"""Attacks on the JSON request log (mcp_oauth.observability.request_log): the path and the tool
name are the client's; whatever they hold, a record is one line that any UTF-8 handler writes,
that a terminal shows without running escape sequences, and that carries no bearer token."""

from __future__ import annotations

import io
import json
import logging

import pytest

from mcp_oauth.observability.request_log import MAX_FIELD_LENGTH, JsonFormatter
from tests.mcp_oauth.observability.test_request_log import log_on, serve  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db(transaction=True)

V = "2026-07-28"


def records(caplog):
    return [r for r in caplog.records if r.name == "mcp_oauth.requests"]


def written(record) -> str:
    """The record as a FileHandler with UTF-8 (strict errors) writes it."""
    stream = io.BytesIO()
    handler = logging.StreamHandler(io.TextIOWrapper(stream, encoding="utf-8", errors="strict", write_through=True))
    handler.setFormatter(JsonFormatter())
    handler.handleError = lambda record: pytest.fail("the handler could not write the record")  # type: ignore[method-assign]
    handler.emit(record)
    return stream.getvalue().decode("utf-8")


HOSTILE_NAMES = [
    'x\n{"level": "ERROR", "message": "forged"}',
    "x\r\nforged",
    "\x1b[31mred\x1b[0m",
    "\x9b31mred",  # 8-bit CSI
    "a\u2028b\u2029c",
    "\x7f",
    "ev\ud800il",
    "n" * 5000,
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_hostile_tool_name_is_one_safe_line(log_on, caplog, resource, user, public_app, mint_token, name):
    token = mint_token(user, public_app, resource=resource.uri)
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    }
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "_meta": meta}}
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "=?base64?" + __import__("base64").b64encode(name.encode("utf-8", "surrogatepass")).decode() + "?=",
    }
    status = serve(log_on, "POST", "/mcp", json.dumps(message).encode(), headers)
    assert status == 400
    [record] = records(caplog)
    text = written(record)
    assert text.count("\n") == 1 and text.endswith("\n")  # one line
    assert not any(ch in text for ch in "\r\x1b\x9b\x7f\u2028\u2029")
    line = json.loads(text)
    assert line["path"] == "/mcp" and line["status"] == 400
    assert token not in text
    if line["tool"] is not None:  # refused before the table (-32020), or recorded bounded
        assert len(line["tool"]) <= MAX_FIELD_LENGTH


@pytest.mark.parametrize("path", ["/mcp\n2026-12-07 INFO forged", "/x\x1b[2J", "/\u2028", "/caf\u00e9\x9b"])
def test_a_hostile_path_is_one_safe_line_with_both_formatters(log_on, caplog, path):
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    serve(log_on, "GET", path)
    [record] = records(caplog)
    text = written(record)
    assert text.count("\n") == 1
    assert not any(ch in text for ch in "\r\x1b\u2028")
    assert json.loads(text)["path"] == path  # JSON carries it, escaped
    plain = record.getMessage()  # what a plain-text formatter writes
    assert "\n" not in plain and "\x1b" not in plain and "\u2028" not in plain
    plain.encode("utf-8")


def test_no_bearer_token_or_secret_in_a_token_request_line(log_on, caplog, service):
    caplog.set_level(logging.INFO, logger="mcp_oauth.requests")
    from tests.support.oauth_helpers import basic

    body = b"grant_type=client_credentials&scope=mcp"
    serve(
        log_on,
        "POST",
        "/oauth/token",
        body,
        {"Content-Type": "application/x-www-form-urlencoded", "Authorization": basic(service[0].client_id, service[1])},
    )
    [record] = records(caplog)
    text = written(record)
    assert service[1] not in text
    assert "access_token" not in text
