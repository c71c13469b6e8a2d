"""What feeds :mod:`.metrics`: the MCP request observer and receivers of the app's signals.

* :data:`observer` (a :class:`MetricsObserver`) — installed on the MCP endpoint by
  :mod:`mcp_oauth.wiring` (``add_observer``) when ``METRICS_ENABLED``: ``mcp_tool_calls_total``
  and ``mcp_request_duration_seconds``.
* :data:`mcp_oauth.audit.audit_event` — consents, dynamic registrations, CIMD fetch failures,
  assertion refusals.
* :data:`mcp_oauth.signals.request_shed` — shed and throttled requests.
* :data:`mcp_oauth.signals.task_created` / :data:`~mcp_oauth.signals.task_finished` — MCP Tasks.

Grants and token refusals are counted by the token view (:func:`.metrics.observe_token_response`),
which sees the client authentication and the error code of every answer; DPoP proof errors at the
resource by the bearer authentication; CIMD fetches by the fetch task; elicitations by the
``elicitation`` app's own receiver (:func:`.metrics.count_elicitation`).

:func:`connect` (from :mod:`mcp_oauth.wiring`) connects the receivers once; each returns at its
first line while metrics are off, and rebuilds the metrics when ``MCP_OAUTH`` changes.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed

from mcp_oauth.audit import audit_event
from mcp_oauth.observability import metrics
from mcp_oauth.signals import request_shed, task_created, task_finished

__all__ = ["MetricsObserver", "connect", "observer"]

#: JSON-RPC "Method not found": the method name the client sent is not ours (not a label value).
METHOD_NOT_FOUND = -32601
UNKNOWN = "_unknown"


class MetricsObserver:
    """Counts every MCP request (duration by method and era) and every ``tools/call`` (by tool and outcome)."""

    def start(self, call: Any) -> None:
        return None

    def finish(self, token: Any, event: Any) -> None:
        """``event``: the transport's ``McpRequestEvent``."""
        current = metrics._metrics
        if current is None:
            return
        call = event.call
        method = UNKNOWN if event.error_code == METHOD_NOT_FOUND else call.method
        current.request(method, call.era, event.duration)
        if method == "tools/call":
            tool = event.target
            if tool is None or call.registry is None or call.registry.get(tool) is None:
                tool = UNKNOWN  # a name the client made up is not a label value (cardinality)
            client_id = call.principal.client_id if current.client_id_labels and call.principal else None
            current.tool_call(tool, event.outcome, client_id)


#: The one observer instance (installed while metrics are on).
observer = MetricsObserver()


def _audit(sender: Any, event: Any, **kwargs: Any) -> None:
    if metrics._metrics is None:
        return
    kind = event.kind
    detail = event.detail or {}
    if kind == "consent.granted":
        metrics.count_consent("granted")
    elif kind == "consent.denied":
        metrics.count_consent("denied")
    elif kind == "client.registered":
        metrics.count_registration()
    elif kind in ("cimd.fetch_failed", "cimd.ssrf_refused"):
        metrics.count_cimd_failure(str(detail.get("reason") or kind.partition(".")[2]))
    elif kind == "assertion.refused":
        metrics.count_assertion_refusal(
            str(detail.get("assertion_kind") or "unknown"), str(detail.get("reason") or "unknown")
        )
    elif kind == "assertion.replayed":
        metrics.count_assertion_refusal(str(detail.get("assertion_kind") or "unknown"), "replay")


def _shed(sender: Any, reason: str, **kwargs: Any) -> None:
    metrics.count_shed(reason)


def _task_created(sender: Any, task: Any, **kwargs: Any) -> None:
    metrics.count_task("created")


def _task_finished(sender: Any, task: Any, **kwargs: Any) -> None:
    metrics.count_task(str(task.status))


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "MCP_OAUTH":
        metrics.configure()


def connect() -> None:
    """Connect the receivers (idempotent) and build the metrics from the settings (from :func:`mcp_oauth.wiring.wire`)."""
    audit_event.connect(_audit, dispatch_uid="mcp_oauth.observability.metrics.audit")
    request_shed.connect(_shed, dispatch_uid="mcp_oauth.observability.metrics.shed")
    task_created.connect(_task_created, dispatch_uid="mcp_oauth.observability.metrics.task_created")
    task_finished.connect(_task_finished, dispatch_uid="mcp_oauth.observability.metrics.task_finished")
    setting_changed.connect(_settings_changed, dispatch_uid="mcp_oauth.observability.metrics.settings")
    metrics.configure()
