"""``manage.py export_tool_calls``: the tool-call audit trail as JSON Lines or CSV, streamed.

::

    manage.py export_tool_calls --format csv --since 2026-12-01 --until 2026-12-08 \\
        --client my-client-id --tool search --output calls.csv

``--since`` (inclusive) and ``--until`` (exclusive) take an ISO 8601 date or date-time (a naive
one is in the site's time zone); ``--client`` and ``--tool`` may be repeated. Without ``--output``
the rows go to standard output. Memory stays flat whatever the number of rows (keyset pages of
:data:`~mcp_oauth.observability.audit_trail_export.PAGE_SIZE`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from mcp_oauth.models import ToolCallRecord
from mcp_oauth.observability.audit_trail_export import FORMATS, export_lines, records


def _moment(text: str, option: str) -> datetime:
    try:
        moment = parse_datetime(text)
        if moment is None:
            day = parse_date(text)
            moment = datetime(day.year, day.month, day.day) if day is not None else None
    except ValueError:
        moment = None
    if moment is None:
        raise CommandError(f"{option}: not an ISO 8601 date or date-time: {text!r}")
    return timezone.make_aware(moment) if timezone.is_naive(moment) else moment


class Command(BaseCommand):
    help = "Export the tool-call audit trail (JSON Lines or CSV), filtered by time, client and tool."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--format", choices=FORMATS, default="jsonl", help="jsonl (default) or csv")
        parser.add_argument("--since", help="from this date or date-time (inclusive, ISO 8601)")
        parser.add_argument("--until", help="before this date or date-time (exclusive, ISO 8601)")
        parser.add_argument("--client", action="append", default=[], help="only this client_id (repeatable)")
        parser.add_argument("--tool", action="append", default=[], help="only this tool (repeatable)")
        parser.add_argument("--output", help="write to this file (default: standard output)")

    def handle(self, *args: Any, **options: Any) -> None:
        queryset = ToolCallRecord.objects.all()
        if options["since"]:
            queryset = queryset.filter(created_at__gte=_moment(options["since"], "--since"))
        if options["until"]:
            queryset = queryset.filter(created_at__lt=_moment(options["until"], "--until"))
        if options["client"]:
            queryset = queryset.filter(client_id__in=options["client"])
        if options["tool"]:
            queryset = queryset.filter(tool__in=options["tool"])
        lines = export_lines(records(queryset), options["format"])
        if options["output"]:
            count = -1 if options["format"] == "csv" else 0
            with open(options["output"], "w", encoding="utf-8", newline="") as out:
                for line in lines:
                    out.write(line)
                    count += 1
            self.stderr.write(f"{count} tool calls written to {options['output']}.")
        else:
            for line in lines:
                self.stdout.write(line, ending="")
