"""A user's rows of the tool-call audit trail in the data lifecycle: export (GDPR Art. 15/20) and erasure (Art. 17).

Connected by :mod:`mcp_oauth.wiring` to :data:`mcp_oauth.signals.user_data_export` and
:data:`mcp_oauth.signals.user_data_erase`:

* the export gets a ``tool_calls`` section: one object per call of the user (when, client,
  resource, method, tool, outcome, error code, duration, arguments digest, the stored arguments
  when the site keeps them), read in primary-key order, 500 rows per round trip;
* the erasure writes this process's queued calls first, then anonymises the user's calls, in range batches without reading them: the user link,
  the stored arguments and the arguments digest (a digest of small arguments can be guessed back)
  are cleared; the call itself (client, tool, outcome, time) stays for the site's counts, like the
  security audit log. Their "last used" rows (:class:`~mcp_oauth.models.ToolCallUse`) are deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mcp_oauth.models import ToolCallRecord, ToolCallUse
from mcp_oauth.observability.audit_trail import writer
from mcp_oauth.shared.batches import update_in_batches

__all__ = ["EXPORT_FIELDS", "erase_tool_calls", "export_tool_calls"]

#: The fields of a call in a user's data export, in order.
EXPORT_FIELDS = (
    "created_at",
    "client_id",
    "resource",
    "method",
    "tool",
    "outcome",
    "error_code",
    "duration_ms",
    "arguments_digest",
    "arguments",
)


def _rows(user_pk: Any) -> Iterator[dict[str, Any]]:
    calls = ToolCallRecord.objects.filter(user_id=user_pk).order_by("pk").values(*EXPORT_FIELDS)
    yield from calls.iterator(chunk_size=500)


def export_tool_calls(sender: Any, user: Any, export: Any, **kwargs: Any) -> None:
    """Receiver of ``user_data_export``: add the ``tool_calls`` section."""
    pk = user.pk
    export.add_section("tool_calls", lambda: _rows(pk))


def erase_tool_calls(sender: Any, user: Any, counts: dict[str, int], **kwargs: Any) -> None:
    """Receiver of ``user_data_erase``: anonymise the user's calls (``counts["tool_calls_anonymised"]``),
    delete their last-used rows.

    The calls this process has queued and not yet written are written first, so that they are
    anonymised too. (A call queued by another worker process in the last flush interval, 200 ms
    by default, may be written after the erasure with the user's id: erase again, or run
    erasures where the workers are drained.)"""
    writer.flush()
    counts["tool_calls_anonymised"] = update_in_batches(
        ToolCallRecord.objects.filter(user_id=user.pk), user=None, arguments=None, arguments_digest=""
    )
    counts["tool_call_uses"] = ToolCallUse.objects.filter(user_id=user.pk).delete()[0]
