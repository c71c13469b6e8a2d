"""Prometheus metrics of the MCP server and its authorization server (``MCP_OAUTH["METRICS_ENABLED"]``).

Off by default: then ``prometheus_client`` is never imported, every ``count_*`` function below
returns at its first line, and the metrics endpoint answers 404. On, the metrics live in
``prometheus_client``'s in-memory values (one process) or in its memory-mapped files when
``PROMETHEUS_MULTIPROC_DIR`` is set (several gunicorn workers and Celery processes: every process
writes its own files there and a scrape sums them; see :mod:`.metrics_gunicorn` and
docs/how-to/metrics.md). Counting is a dictionary lookup and an add: no I/O on the request path.

The metrics (units in the names; no ``client_id`` or user label unless
``METRICS_CLIENT_ID_LABELS``, for cardinality):

==========================================  ==============================================================
``mcp_tool_calls_total``                    ``tools/call`` requests by ``tool`` and ``outcome`` (``ok``,
                                            ``tool_error``, ``error``, ``denied``, ``input_required``)
``mcp_request_duration_seconds``            histogram of MCP JSON-RPC requests by ``method`` and ``era``
                                            (``legacy``: 2025-era sessions, ``modern``: 2026-07-28)
``mcp_oauth_grants_issued_total``           tokens issued by ``grant_type`` and ``client_auth``
                                            (``none``, ``client_secret_basic``, ``client_secret_post``,
                                            ``private_key_jwt``)
``mcp_oauth_token_refusals_total``          token endpoint refusals by ``error`` (the OAuth error code)
``mcp_oauth_assertion_refusals_total``      JWT assertions refused by ``assertion_kind`` and ``reason``
``mcp_dpop_proof_errors_total``             DPoP proofs refused by ``endpoint`` (``token``, ``resource``)
                                            and ``error`` (``invalid_dpop_proof``, ``use_dpop_nonce``)
``mcp_cimd_fetches_total``                  Client ID Metadata Document fetches by ``outcome``
                                            (``fetched``, ``not_modified``, ``failed``)
``mcp_cimd_fetch_failures_total``           failed fetches by ``reason`` (the audit event's)
``mcp_oauth_registrations_total``           RFC 7591 dynamic client registrations accepted
``mcp_oauth_consents_total``                consent decisions by ``decision`` (``granted``, ``denied``)
``mcp_requests_shed_total``                 requests refused for load by ``reason`` (``in_flight``,
                                            ``rate_limit``, ``throttled``)
``mcp_elicitations_total``                  elicitations by ``mode`` (``form``, ``url``) and ``outcome``
                                            (``requested``, then the status they finished in)
``mcp_tasks_total``                         MCP Tasks by ``status`` (``created``, then ``completed``,
                                            ``failed``, ``cancelled``)
==========================================  ==============================================================

Label values that come from a request are bounded: an unknown tool is ``_unknown``, an unknown
method ``_unknown``, an unknown grant type or error code ``other``.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from mcp_oauth.settings import mcp_oauth_settings

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponseBase
    from prometheus_client import CollectorRegistry

__all__ = [
    "DURATION_BUCKETS",
    "Metrics",
    "active",
    "configure",
    "count_assertion_refusal",
    "count_cimd_failure",
    "count_cimd_fetch",
    "count_consent",
    "count_dpop_proof_error",
    "count_elicitation",
    "count_registration",
    "count_shed",
    "count_task",
    "multiprocess_dir",
    "observe_token_response",
    "registry",
]

#: Buckets of ``mcp_request_duration_seconds`` (seconds): those the OpenTelemetry MCP semantic
#: conventions advise for ``mcp.server.operation.duration``.
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)

#: Label values kept as they are; anything else is counted as ``other``.
GRANT_TYPES = frozenset(
    {
        "authorization_code",
        "client_credentials",
        "refresh_token",
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
        "urn:ietf:params:oauth:grant-type:token-exchange",
    }
)
OAUTH_ERRORS = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "invalid_target",
        "invalid_dpop_proof",
        "use_dpop_nonce",
        "access_denied",
        "slow_down",
        "temporarily_unavailable",
        "server_error",
    }
)
DPOP_ERRORS = frozenset({"invalid_dpop_proof", "use_dpop_nonce"})
CLIENT_ASSERTION = "client_assertion"


class Metrics:
    """The metric objects of one configuration (built by :func:`configure`; needs ``prometheus_client``).

    :param client_id_labels: add a ``client_id`` label to tool calls and grants.
    :param registry: where the metrics are registered (a fresh one by default).
    """

    def __init__(self, *, client_id_labels: bool = False, registry: CollectorRegistry | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.client_id_labels = client_id_labels
        client = ("client_id",) if client_id_labels else ()
        r = self.registry
        self.tool_calls = Counter(
            "mcp_tool_calls", "MCP tools/call requests.", ("tool", "outcome", *client), registry=r
        )
        self.request_duration = Histogram(
            "mcp_request_duration_seconds",
            "Duration of MCP JSON-RPC requests (seconds).",
            ("method", "era"),
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.grants = Counter(
            "mcp_oauth_grants_issued", "Tokens issued.", ("grant_type", "client_auth", *client), registry=r
        )
        self.token_refusals = Counter("mcp_oauth_token_refusals", "Token endpoint refusals.", ("error",), registry=r)
        self.assertion_refusals = Counter(
            "mcp_oauth_assertion_refusals", "JWT assertions refused.", ("assertion_kind", "reason"), registry=r
        )
        self.dpop_errors = Counter("mcp_dpop_proof_errors", "DPoP proofs refused.", ("endpoint", "error"), registry=r)
        self.cimd_fetches = Counter(
            "mcp_cimd_fetches", "Client ID Metadata Document fetches.", ("outcome",), registry=r
        )
        self.cimd_failures = Counter(
            "mcp_cimd_fetch_failures", "Client ID Metadata Document fetch failures.", ("reason",), registry=r
        )
        self.registrations = Counter("mcp_oauth_registrations", "Dynamic client registrations accepted.", registry=r)
        self.consents = Counter("mcp_oauth_consents", "Consent decisions.", ("decision",), registry=r)
        self.shed = Counter("mcp_requests_shed", "Requests refused for load.", ("reason",), registry=r)
        self.elicitations = Counter("mcp_elicitations", "Elicitations.", ("mode", "outcome"), registry=r)
        self.tasks = Counter("mcp_tasks", "MCP Tasks.", ("status",), registry=r)
        # Children by label values: a lookup without the metric's lock on the hot path.
        self._tool_children: dict[tuple[str, ...], Any] = {}
        self._duration_children: dict[tuple[str, str], Any] = {}

    def tool_call(self, tool: str, outcome: str, client_id: str | None = None) -> None:
        """Count one ``tools/call``."""
        key = (tool, outcome, client_id or "") if self.client_id_labels else (tool, outcome)
        child = self._tool_children.get(key)
        if child is None:
            child = self._tool_children.setdefault(key, self.tool_calls.labels(*key))
        child.inc()

    def request(self, method: str, era: str, seconds: float) -> None:
        """Observe the duration of one MCP request."""
        key = (method, era)
        child = self._duration_children.get(key)
        if child is None:
            child = self._duration_children.setdefault(key, self.request_duration.labels(*key))
        child.observe(seconds)


#: The current metrics, or None while ``METRICS_ENABLED`` is off (every ``count_*`` is then a no-op).
_metrics: Metrics | None = None


def multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR`` when set (prometheus_client's multiprocess mode), else None."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def configure() -> Metrics | None:
    """(Re)build the metrics from the settings: :class:`Metrics` when ``METRICS_ENABLED``, else None.

    Called at start-up by :func:`mcp_oauth.observability.metrics_receivers.connect` and again when
    ``MCP_OAUTH`` changes. In one process the counts start again from zero; in multiprocess mode they
    live in the files and are kept.
    """
    global _metrics
    if not mcp_oauth_settings.METRICS_ENABLED:
        _metrics = None
        return None
    _metrics = Metrics(client_id_labels=bool(mcp_oauth_settings.METRICS_CLIENT_ID_LABELS))
    return _metrics


def active() -> Metrics | None:
    """The current :class:`Metrics`, or None when metrics are off."""
    return _metrics


def registry() -> CollectorRegistry | None:
    """The registry a scrape reads: in multiprocess mode a fresh one collecting every process's files
    (``MultiProcessCollector``), else this process's own; None when metrics are off."""
    if _metrics is None:
        return None
    path = multiprocess_dir()
    if path is None:
        return _metrics.registry
    from prometheus_client import CollectorRegistry, multiprocess

    collected = CollectorRegistry()
    multiprocess.MultiProcessCollector(collected, path=path)
    return collected


def _bounded(value: str, known: frozenset[str]) -> str:
    return value if value in known else "other"


def client_auth_method(request: HttpRequest) -> str:
    """How the client authenticated at the token endpoint (RFC 7591 §2 ``token_endpoint_auth_method`` names)."""
    if request.POST.get("client_assertion"):
        return "private_key_jwt"
    if request.META.get("HTTP_AUTHORIZATION", "")[:6].lower() == "basic ":
        return "client_secret_basic"
    if request.POST.get("client_secret"):
        return "client_secret_post"
    return "none"


def observe_token_response(request: HttpRequest, response: HttpResponseBase) -> None:
    """Count one answer of the token endpoint: a grant (2xx) by grant type and client
    authentication, or a refusal by its OAuth error code (and a DPoP proof error)."""
    metrics = _metrics
    if metrics is None:
        return
    status = response.status_code
    if status < 300:
        grant_type = _bounded(request.POST.get("grant_type", ""), GRANT_TYPES)
        labels = [grant_type, client_auth_method(request)]
        if metrics.client_id_labels:
            labels.append(request.POST.get("client_id", "") or "")
        metrics.grants.labels(*labels).inc()
        return
    error = "other"
    try:
        body = json.loads(getattr(response, "content", b"") or b"{}")
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            error = _bounded(body["error"], OAUTH_ERRORS)
    except ValueError:
        pass
    metrics.token_refusals.labels(error).inc()
    if error in DPOP_ERRORS:
        metrics.dpop_errors.labels("token", error).inc()


def count_dpop_proof_error(endpoint: str, error: str) -> None:
    """Count a refused DPoP proof at ``endpoint`` (``token`` or ``resource``)."""
    if _metrics is not None:
        _metrics.dpop_errors.labels(endpoint, _bounded(error, DPOP_ERRORS)).inc()


def count_assertion_refusal(assertion_kind: str, reason: str) -> None:
    """Count a refused JWT assertion (``client_assertion`` or ``id_jag``) by its reason code."""
    if _metrics is not None:
        _metrics.assertion_refusals.labels(str(assertion_kind)[:40], str(reason)[:40]).inc()


def count_cimd_fetch(outcome: str) -> str:
    """Count one CIMD fetch by outcome; returns ``outcome`` (``skipped``: not counted)."""
    if _metrics is not None and outcome in ("fetched", "not_modified", "failed"):
        _metrics.cimd_fetches.labels(outcome).inc()
    return outcome


def count_cimd_failure(reason: str) -> None:
    """Count a failed CIMD fetch by reason."""
    if _metrics is not None:
        _metrics.cimd_failures.labels(str(reason)[:40]).inc()


def count_registration() -> None:
    """Count one accepted dynamic client registration."""
    if _metrics is not None:
        _metrics.registrations.inc()


def count_consent(decision: str) -> None:
    """Count one consent decision (``granted`` or ``denied``)."""
    if _metrics is not None:
        _metrics.consents.labels(decision).inc()


def count_shed(reason: str) -> None:
    """Count one request refused for load (``in_flight``, ``rate_limit``, ``throttled``)."""
    if _metrics is not None:
        _metrics.shed.labels(_bounded(reason, frozenset({"in_flight", "rate_limit", "throttled"}))).inc()


def count_elicitation(mode: str, outcome: str) -> None:
    """Count an elicitation event: ``outcome`` ``requested`` when it is created, then the status it
    finished in (``accepted``, ``declined``, ``cancelled``, ``invalid``, ``completed``, ``failed``,
    ``expired``). The public API the ``elicitation`` app counts through."""
    if _metrics is not None:
        _metrics.elicitations.labels(str(mode)[:8], str(outcome)[:16]).inc()


def count_task(status: str) -> None:
    """Count an MCP Task event: ``created``, or the status it finished in."""
    if _metrics is not None:
        _metrics.tasks.labels(str(status)[:16]).inc()
