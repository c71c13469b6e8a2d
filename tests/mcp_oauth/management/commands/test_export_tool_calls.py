"""manage.py export_tool_calls (mcp_oauth.management.commands.export_tool_calls): CSV to a file, the --since/--until/--client/--tool filters, a bad date refused."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from mcp_oauth.observability.audit_trail_export import COLUMNS
from tests.mcp_oauth.observability.test_audit_trail_export import (  # noqa: F401 - fixtures and helpers
    rows,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_committed_trail_rows")]


def test_export_csv_quotes_and_filters(rows, tmp_path):
    target = tmp_path / "calls.csv"
    err = io.StringIO()
    call_command("export_tool_calls", "--format", "csv", "--output", str(target), stderr=err)
    assert err.getvalue().strip() == f"3 tool calls written to {target}."
    text = target.read_text(encoding="utf-8")
    assert text.splitlines()[0] == ",".join(COLUMNS)
    parsed = list(csv.DictReader(io.StringIO(text)))
    assert [r["tool"] for r in parsed] == ["echo", "search", "echo"]
    assert parsed[1]["error_code"] == "-32602" and parsed[0]["error_code"] == ""
    assert parsed[2]["arguments"] == '{"q": "é,\\"x\\""}'
    assert parsed[2]["trace_id"] == "f" * 32

    def export(*args):
        out = io.StringIO()
        call_command("export_tool_calls", "--format", "csv", *args, stdout=out)
        return [r["id"] for r in csv.DictReader(io.StringIO(out.getvalue()))]

    ids = [str(r.pk) for r in rows]
    assert export("--since", "2026-12-01T12:30:00+00:00") == ids[1:]
    assert export("--until", "2026-12-02") == ids[:2]
    assert export("--client", "client-b") == ids[2:]
    assert export("--tool", "search", "--tool", "echo", "--client", "client-a") == ids[:2]


def test_export_refuses_a_bad_date():
    with pytest.raises(CommandError, match="--since: not an ISO 8601 date"):
        call_command("export_tool_calls", "--since", "yesterday", stdout=io.StringIO())
