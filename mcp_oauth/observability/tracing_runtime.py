"""Tracing when it is on: installs the MCP observer and the receivers, opens the OAuth spans.

Loaded only by :func:`mcp_oauth.observability.tracing.install` when tracing is on (it imports
``opentelemetry``). :func:`install` adds :class:`~.tracing_mcp.McpTracingObserver` to the MCP
endpoint's observers, connects the Celery context propagation (:mod:`.tracing_celery`) and the
``mcp_session_ended`` receiver (``mcp.server.session.duration``). The providers themselves are
created on first use in each process (:mod:`.tracing_setup`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from mcp_oauth.observability import tracing_celery
from mcp_oauth.observability.tracing_mcp import McpTracingObserver, record_session_end
from mcp_oauth.observability.tracing_oauth import Exchange
from mcp_oauth.observability.tracing_setup import providers
from mcp_oauth.signals import mcp_session_ended

__all__ = ["OBSERVER", "begin_oauth_span", "call_in_span", "end_oauth_span", "install", "uninstall"]

#: The one tracing observer of the MCP endpoint.
OBSERVER = McpTracingObserver()
_SESSION_UID = "mcp_oauth.observability.tracing.session_ended"


def install(add_observer: Callable[[Any], None]) -> None:
    """Install the observer with ``add_observer`` and connect the receivers (idempotent)."""
    add_observer(OBSERVER)
    tracing_celery.connect()
    mcp_session_ended.connect(_session_ended, weak=False, dispatch_uid=_SESSION_UID)


def uninstall(remove_observer: Callable[[Any], None]) -> None:
    """Undo :func:`install`."""
    remove_observer(OBSERVER)
    tracing_celery.disconnect()
    mcp_session_ended.disconnect(dispatch_uid=_SESSION_UID)


def _session_ended(sender: Any = None, session: Any = None, **kwargs: Any) -> None:
    if session is not None:
        record_session_end(session)


def begin_oauth_span(exchange: Exchange) -> tuple[trace.Span, object]:
    """Open the SERVER span of an OAuth endpoint request, current while the endpoint runs."""
    parent = propagate.extract(exchange.carrier) if exchange.carrier else None
    span = providers().tracer.start_span(
        f"{exchange.method} {exchange.route}",
        context=parent,
        kind=SpanKind.SERVER,
        attributes={
            "http.request.method": exchange.method,
            "http.route": exchange.route,
            "oauth.endpoint": exchange.endpoint,
        },
    )
    return span, otel_context.attach(trace.set_span_in_context(span, parent))


def end_oauth_span(handle: tuple[trace.Span, object], exchange: Exchange) -> None:
    """Set the outcome of the request (no secret: see :mod:`.tracing_oauth`) and end the span."""
    span, token = handle
    try:
        status = exchange.status if exchange.status is not None else 500
        error = exchange.error_code()
        span.set_attributes(exchange.request_attributes())
        span.set_attribute("http.response.status_code", status)
        span.set_attribute("oauth.outcome", "error" if error or status >= 400 else "ok")
        if error:
            span.set_attribute("error.type", error)
        elif status >= 500:
            span.set_attribute("error.type", str(status))
        if status >= 500:
            span.set_status(Status(StatusCode.ERROR))
    finally:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()


def call_in_span(name: str, attributes: dict[str, Any], function: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` inside a CLIENT span (see
    :func:`mcp_oauth.observability.tracing.traced`); ``http.response.status_code`` from a
    result's ``status`` attribute."""
    with providers().tracer.start_as_current_span(
        name, kind=SpanKind.CLIENT, attributes=attributes, record_exception=False, set_status_on_exception=False
    ) as span:
        try:
            result = function(*args, **kwargs)
        except Exception as exc:
            reason = getattr(exc, "reason", None)
            span.set_attribute("error.type", reason if isinstance(reason, str) else type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            raise
        status = getattr(result, "status", None)
        if isinstance(status, int):
            span.set_attribute("http.response.status_code", status)
        return result
