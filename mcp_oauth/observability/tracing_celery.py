"""Trace context across Celery: the worker's span of a task is a child of the request that queued it.

Celery's own signals, not ``opentelemetry-instrumentation-celery``: the app needs only the W3C
context carried in the message headers (the propagator API does the encoding), and the
instrumentation package (a 0.x beta, one more dependency of the ``[otel]`` extra) patches every
task of every Celery app in the process and must be started in ``worker_process_init`` by the
site. The signals work the same in a prefork pool, a thread pool and eager mode.

* ``before_task_publish``: the current context (the MCP or OAuth request's SERVER span) is
  injected into the message headers (``traceparent``, ``tracestate``);
* ``task_prerun``: the worker extracts it and opens a CONSUMER span ``{task name} process``
  (attributes ``messaging.system=celery``, ``messaging.operation.type=process``,
  ``messaging.message.id``, ``messaging.destination.name`` when routed), current while the task runs;
* ``task_postrun``: the span ends (``celery.task.state``; status ERROR and ``error.type`` the
  exception class when the task raised: ``task_failure``).
"""

from __future__ import annotations

from typing import Any

from celery.signals import before_task_publish, task_failure, task_postrun, task_prerun
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from mcp_oauth.observability.tracing_setup import providers

__all__ = ["connect", "disconnect"]

_UID = "mcp_oauth.observability.tracing_celery"
#: Open spans by task id (the postrun of a task runs in the process and thread of its prerun).
_open: dict[str, tuple[trace.Span, object]] = {}


def connect() -> None:
    before_task_publish.connect(_publish, weak=False, dispatch_uid=f"{_UID}.publish")
    task_prerun.connect(_prerun, weak=False, dispatch_uid=f"{_UID}.prerun")
    task_failure.connect(_failure, weak=False, dispatch_uid=f"{_UID}.failure")
    task_postrun.connect(_postrun, weak=False, dispatch_uid=f"{_UID}.postrun")


def disconnect() -> None:
    before_task_publish.disconnect(dispatch_uid=f"{_UID}.publish")
    task_prerun.disconnect(dispatch_uid=f"{_UID}.prerun")
    task_failure.disconnect(dispatch_uid=f"{_UID}.failure")
    task_postrun.disconnect(dispatch_uid=f"{_UID}.postrun")


def _publish(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    if headers is not None and trace.get_current_span().get_span_context().is_valid:
        propagate.inject(headers)


def _prerun(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    if task_id is None or task is None:
        return
    request = task.request
    carrier = {key: value for key in ("traceparent", "tracestate") if isinstance(value := _header(request, key), str)}
    parent = propagate.extract(carrier) if carrier else None
    attributes = {
        "messaging.system": "celery",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.message.id": task_id,
    }
    routing = getattr(request, "delivery_info", None) or {}
    if isinstance(routing, dict) and isinstance(routing.get("routing_key"), str):
        attributes["messaging.destination.name"] = routing["routing_key"]
    span = providers().tracer.start_span(
        f"{task.name} process", context=parent, kind=SpanKind.CONSUMER, attributes=attributes
    )
    _open[task_id] = (span, otel_context.attach(trace.set_span_in_context(span)))


def _header(request: Any, key: str) -> Any:
    value = getattr(request, key, None)  # protocol 2: custom headers become request attributes
    if value is None and isinstance(getattr(request, "headers", None), dict):
        value = request.headers.get(key)
    return value


def _failure(task_id: str | None = None, exception: BaseException | None = None, **kwargs: Any) -> None:
    entry = _open.get(task_id or "")
    if entry is not None and exception is not None:
        entry[0].set_attribute("error.type", type(exception).__qualname__)
        entry[0].set_status(Status(StatusCode.ERROR, type(exception).__qualname__))


def _postrun(task_id: str | None = None, state: str | None = None, **kwargs: Any) -> None:
    entry = _open.pop(task_id or "", None)
    if entry is None:
        return
    span, token = entry
    if state:
        span.set_attribute("celery.task.state", state)
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    finally:
        span.end()
