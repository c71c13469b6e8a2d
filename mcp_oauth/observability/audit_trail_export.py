"""Export of the tool-call audit trail as JSON Lines or CSV, streamed in bounded memory.

Used by the ``export_tool_calls`` management command and the admin's export actions. Rows are
read by keyset pagination on the primary key (``WHERE id > last ORDER BY id LIMIT n``: every page
is one index range, however deep into the table) and turned into text line by line, so memory
stays flat whatever the number of rows (bench/audit_export.py measures it on a million rows).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from mcp_oauth.models import ToolCallRecord

__all__ = ["COLUMNS", "FORMATS", "FORMULA_STARTS", "PAGE_SIZE", "export_lines", "records", "spreadsheet_safe"]

#: The exported columns, in order (the CSV header; the keys of each JSON line).
COLUMNS = (
    "id",
    "created_at",
    "user_id",
    "client_id",
    "resource",
    "method",
    "tool",
    "era",
    "protocol_version",
    "outcome",
    "error_code",
    "duration_ms",
    "arguments_digest",
    "arguments",
    "trace_id",
)

#: Rows read per query.
PAGE_SIZE = 2000

FORMATS = ("jsonl", "csv")


def records(queryset: QuerySet[ToolCallRecord] | None = None, page_size: int = PAGE_SIZE) -> Iterator[dict[str, Any]]:
    """The rows of ``queryset`` (default: every row) as dicts of :data:`COLUMNS`, in ``id`` order,
    ``page_size`` per query (keyset pagination)."""
    base = (ToolCallRecord.objects.all() if queryset is None else queryset).order_by("pk").values(*COLUMNS)
    last = 0
    while True:
        page = list(base.filter(pk__gt=last)[:page_size])
        if not page:
            return
        yield from page
        last = page[-1]["id"]


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return value


#: What a spreadsheet reads as the start of a formula (OWASP "CSV injection"): a text cell starting
#: with one of these is exported with a leading apostrophe (``'=cmd|…`` shows as text).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: Any) -> Any:
    """``value`` prefixed with ``'`` when it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def export_lines(rows: Iterator[dict[str, Any]], fmt: str) -> Iterator[str]:
    """``rows`` as text: ``jsonl`` (one JSON object per line, UTF-8) or ``csv`` (RFC 4180, a header
    line of :data:`COLUMNS`; ``arguments`` as JSON text, empty when absent; ``\\r\\n`` line ends;
    a text cell a spreadsheet would read as a formula, starting with one of :data:`FORMULA_STARTS`
    (the tool name is the client's choice), begins with ``'``; numbers are written as they are).

    :raises ValueError: unknown ``fmt``.
    """
    if fmt == "jsonl":
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        for row in rows:
            yield dumps({key: _text(row[key]) for key in COLUMNS}) + "\n"
        return
    if fmt != "csv":
        raise ValueError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    buffer = io.StringIO()
    writer = csv.writer(buffer)

    def line(values: list[Any]) -> str:
        writer.writerow(values)
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    yield line(list(COLUMNS))
    for row in rows:
        values = []
        for key in COLUMNS:
            value = row[key]
            if key == "arguments":
                value = "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)
            elif value is None:
                value = ""
            values.append(spreadsheet_safe(_text(value)))
        yield line(values)
