"""One SERVER span and one duration measurement per MCP request (OpenTelemetry MCP semantic
conventions, ``docs/gen-ai/mcp.md`` of open-telemetry/semantic-conventions-genai).

:class:`McpTracingObserver` is an observer of :mod:`mcp_oauth.mcp_server.transport.observers`
(both eras). Its span:

* name ``{mcp.method.name} {target}``, the target being the tool name (``tools/call``) or the
  prompt name (``prompts/get``); ``{mcp.method.name}`` alone otherwise (a resource URI is an
  attribute, never in the name: high cardinality);
* kind SERVER; parent: the context the client propagated in ``params._meta``
  (``traceparent``/``tracestate``/``baggage``, SEP-414) — else the ambient one; a link to the
  HTTP request's context (the ambient span, or the request's ``traceparent`` header) when it is
  not the parent;
* client text (tool or prompt name, resource URI) cut to :data:`MAX_TARGET_LENGTH` characters, NUL
  and lone surrogates as U+FFFD (what the OTLP exporter can encode); on the duration histogram a
  tool or prompt name the server does not know is ``_OTHER`` (a made-up name is not a series);
* attributes ``mcp.method.name``, ``jsonrpc.request.id`` (text), ``mcp.protocol.version``,
  ``mcp.session.id`` (2025 era, with a session), ``gen_ai.tool.name`` and
  ``gen_ai.operation.name=execute_tool`` / ``gen_ai.prompt.name`` / ``mcp.resource.uri`` (the
  convention's *recommended* ``network.transport`` / ``network.protocol.name`` are left out: the
  same ``tcp`` / ``http`` on every span of the process, and each attribute costs on the hot path);
* on failure ``error.type``: the JSON-RPC code as text (and ``rpc.response.status_code``) with
  status ERROR and the error message as description; ``tool_error`` for a ``tools/call`` result
  with ``isError`` true; ``insufficient_scope`` when the token lacks a scope (HTTP 403);
* opt-in (``TRACING_CAPTURE_CONTENT``): ``gen_ai.tool.call.arguments`` and
  ``gen_ai.tool.call.result`` as JSON text.

Histograms (seconds, the convention's advised buckets): ``mcp.server.operation.duration`` per
request, ``mcp.server.session.duration`` per 2025-era session ended by DELETE
(:func:`record_session_end`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from mcp_oauth.observability.tracing_setup import providers
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.text import storable_text

__all__ = ["DURATION_BUCKETS", "MAX_TARGET_LENGTH", "OTHER", "McpTracingObserver", "record_session_end"]

#: ``ExplicitBucketBoundaries`` advised by the MCP semantic conventions for both histograms (s).
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)

#: JSON-RPC "Invalid params": the answer to an unknown tool or prompt name.
INVALID_PARAMS = -32602

_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
_RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})

#: Longest client-chosen text (tool or prompt name, resource URI) put in a span name or attribute,
#: in characters (MCP tool names are at most 128); longer is cut here.
MAX_TARGET_LENGTH = 256

#: The value of ``gen_ai.tool.name`` / ``gen_ai.prompt.name`` on the duration histogram for a name
#: the server does not know (the convention's ``_OTHER``: a made-up name is not a series).
OTHER = "_OTHER"


def _client_text(value: str) -> str:
    """Client text for a span: at most :data:`MAX_TARGET_LENGTH` characters, NUL and lone
    surrogates as U+FFFD (the OTLP exporter encodes every string as UTF-8; one it cannot encode
    loses the whole batch of spans)."""
    return storable_text(value[:MAX_TARGET_LENGTH])


def _known(call: Any, method: str, name: str) -> bool:
    """Whether the server has the tool ``name`` (``tools/call``; a prompt name is told in
    :meth:`McpTracingObserver.finish`: -32602 is the answer to an unknown one)."""
    if method != "tools/call":
        return True
    registry = getattr(call, "registry", None)
    return registry is not None and registry.get(name) is not None


class _Instruments:
    """The two histograms, created once per process with its meter."""

    def __init__(self) -> None:
        meter = providers().meter
        self.operation = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="The duration of the MCP request or notification as observed on the receiver.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.session = meter.create_histogram(
            "mcp.server.session.duration",
            unit="s",
            description="The duration of the MCP session as observed on the MCP server.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )


_instruments: _Instruments | None = None


def instruments() -> _Instruments:
    global _instruments
    if _instruments is None:
        _instruments = _Instruments()
    return _instruments


class _Shape(NamedTuple):
    """What a request's span and measurement take from its method, version and target."""

    name: str
    attributes: dict[str, Any]
    metric_attributes: dict[str, str]


_shapes: dict[tuple[Any, ...], _Shape] = {}

#: At most this many shapes are kept per process (methods x versions x known names: a name the
#: server does not know is never kept, so a client's made-up names cannot grow it); past it the
#: cache starts again.
MAX_SHAPES = 4096


def _shape(method: str, version: str, target_attribute: str | None, target: str | None, known: bool) -> _Shape:
    """The span name, constant span attributes and histogram attributes of a request (cached: the
    dicts are shared and never changed; the SDK copies what it keeps)."""
    key = (method, version, target[:MAX_TARGET_LENGTH] if target is not None else None)
    cacheable = known and isinstance(version, str) and len(version) <= 32
    shape = _shapes.get(key) if cacheable else None
    if shape is not None:
        return shape
    attributes: dict[str, Any] = {"mcp.method.name": method, "mcp.protocol.version": version}
    name = method
    if target_attribute is not None and target is not None:
        text = _client_text(target)
        attributes[target_attribute] = text
        if known:  # a name the client made up would make span names unbounded
            name = f"{method} {text}"
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
    metric_attributes = dict(attributes)
    if not known:
        metric_attributes[target_attribute] = OTHER  # type: ignore[index]
    shape = _Shape(name, attributes, metric_attributes)
    if cacheable:
        if len(_shapes) >= MAX_SHAPES:
            _shapes.clear()
        _shapes[key] = shape
    return shape


class McpTracingObserver:
    """The tracing observer (installed by :mod:`~mcp_oauth.observability.tracing_runtime`)."""

    def start(self, call: Any) -> tuple[trace.Span, object, dict[str, str]]:
        """Open the request's span and make it current (the handler's spans are its children).

        :returns: the token :meth:`finish` gets: the span, the context token, the metric attributes.
        """
        method = call.method
        params = call.params if isinstance(call.params, dict) else {}
        target_attribute = _NAMED.get(method)
        target = params.get("name") if target_attribute else None
        if isinstance(target, str):
            known = _known(call, method, target)
        else:
            known, target = True, None
        # The span name, the constant attributes and the histogram's attributes depend on the method,
        # the version and the (known) target only: built once per such key and process.
        shape = _shape(method, call.protocol_version, target_attribute, target, known)
        attributes = dict(shape.attributes)
        if method == "tools/call" and mcp_oauth_settings.TRACING_CAPTURE_CONTENT and "arguments" in params:
            attributes["gen_ai.tool.call.arguments"] = storable_text(_json(params["arguments"]))
        elif method in _RESOURCE_METHODS and isinstance(params.get("uri"), str):
            attributes["mcp.resource.uri"] = _client_text(params["uri"])
        if call.message_id is not None:
            attributes["jsonrpc.request.id"] = str(call.message_id)
        if call.session is not None:
            attributes["mcp.session.id"] = str(call.session.pk)

        parent, links = _parent_and_links(params.get("_meta"), call.http_request)
        span = providers().tracer.start_span(
            shape.name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        return span, token, shape.metric_attributes

    def finish(self, token: tuple[trace.Span, object, dict[str, str]], event: Any) -> None:
        """Set the outcome, end the span, record the duration."""
        span, context_token, metric_attributes = token
        error_type = None
        if event.outcome == "error":
            error_type = str(event.error_code) if event.error_code is not None else "_OTHER"
            error = (event.message or {}).get("error")
            description = error.get("message") if isinstance(error, dict) else None
            span.set_attribute("rpc.response.status_code", error_type)
            span.set_status(Status(StatusCode.ERROR, description if isinstance(description, str) else None))
        elif event.outcome == "tool_error":
            error_type = "tool_error"
            span.set_status(Status(StatusCode.ERROR))
        elif event.outcome == "denied":
            error_type = "insufficient_scope"
            span.set_status(Status(StatusCode.ERROR, "insufficient_scope"))
        elif mcp_oauth_settings.TRACING_CAPTURE_CONTENT and event.call.method == "tools/call" and event.message:
            span.set_attribute("gen_ai.tool.call.result", storable_text(_json(event.message.get("result"))))
        if event.error_code == INVALID_PARAMS and event.call.method == "prompts/get":
            metric_attributes = {**metric_attributes, "gen_ai.prompt.name": OTHER}  # a made-up name
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            metric_attributes = {**metric_attributes, "error.type": error_type}
        try:
            otel_context.detach(context_token)  # type: ignore[arg-type]
        finally:
            span.end()
            instruments().operation.record(event.duration, metric_attributes)


def record_session_end(session: Any) -> None:
    """Record ``mcp.server.session.duration`` for a 2025-era session that just ended (DELETE)."""
    if session.created_at is None or session.ended_at is None:
        return
    seconds = max(0.0, (session.ended_at - session.created_at).total_seconds())
    attributes = {}
    if session.protocol_version:
        attributes["mcp.protocol.version"] = session.protocol_version
    instruments().session.record(seconds, attributes)


def _parent_and_links(meta: Any, http_request: Any) -> tuple[otel_context.Context | None, list[Link]]:
    """The MCP parent (``_meta``, else ambient) and the links to the transport's context."""
    ambient = trace.get_current_span().get_span_context()
    transport = ambient if ambient.is_valid else _http_context(http_request)
    parent = None
    if isinstance(meta, dict) and "traceparent" in meta:
        extracted = propagate.extract(_text_only(meta))
        if trace.get_current_span(extracted).get_span_context().is_valid:
            parent = extracted
    if parent is None:
        if transport is not None and not ambient.is_valid:
            # No MCP context: the HTTP request's own traceparent is the parent.
            return trace.set_span_in_context(trace.NonRecordingSpan(transport)), []
        return None, []
    return parent, [Link(transport)] if transport is not None else []


def _http_context(http_request: Any) -> trace.SpanContext | None:
    meta = getattr(http_request, "META", None)
    if isinstance(meta, dict):  # a Django request: its headers are in META (one lookup)
        if "HTTP_TRACEPARENT" not in meta:
            return None
    headers = getattr(http_request, "headers", None)
    if not isinstance(headers, Mapping) or "traceparent" not in headers:
        return None
    context = trace.get_current_span(propagate.extract(headers)).get_span_context()
    return context if context.is_valid else None


def _text_only(meta: dict[str, Any]) -> dict[str, str]:
    return {key: value for key, value in meta.items() if isinstance(value, str)}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
