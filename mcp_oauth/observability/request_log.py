"""The structured request log: one JSON line per HTTP request (``MCP_OAUTH["REQUEST_LOG_ENABLED"]``).

:func:`request_log_lane` is an ASGI middleware: it wraps the site's application outside the lanes
that skip Django's middleware stack (the MCP and token endpoints), so that every HTTP request is
logged once, whichever way it is served::

    application = health_lane(request_log_lane(token_lane(mcp_lane(get_asgi_application()))))

When the request has finished it logs one record on the logger ``mcp_oauth.requests`` (level
INFO) whose ``request`` attribute holds exactly these keys (:data:`FIELDS`):

* ``method``, ``path`` (without the query string), ``status`` (the HTTP status sent; 0 when the
  client left first), ``duration_ms`` (float, to the response's end, streams included);
* ``trace_id``: 32 hex digits of the current OpenTelemetry trace (when ``opentelemetry`` is
  installed and a span is current during the request; else null);
* ``client_id``, ``user_id``: of the bearer token of an MCP request, or of the grant issued at
  the token endpoint (null otherwise);
* ``mcp_method``, ``tool``: the JSON-RPC method of an MCP request and its target (tool or
  prompt name, resource URI), null for other requests.

The MCP fields are filled by :data:`observer` (installed by :mod:`mcp_oauth.wiring` when the log
is on), the token endpoint's by a receiver of :data:`mcp_oauth.audit.audit_event`. Route the
logger through Django's ``LOGGING`` with :class:`JsonFormatter` (see docs/how-to/metrics.md); use
a ``logging.handlers.QueueHandler`` in front of a slow handler, the record is emitted on the
server's event loop after the response was sent. Off (the default) when the application is
built, the lane is not there at all.
"""

from __future__ import annotations

import contextvars
import datetime
import importlib.util
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "FIELDS",
    "MAX_FIELD_LENGTH",
    "JsonFormatter",
    "RequestLogObserver",
    "annotate",
    "observer",
    "request_log_lane",
    "trace_id",
]

logger = logging.getLogger("mcp_oauth.requests")

#: The keys of every request record, in order.
FIELDS = (
    "method",
    "path",
    "status",
    "duration_ms",
    "trace_id",
    "client_id",
    "user_id",
    "mcp_method",
    "tool",
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Where the lane puts the record in the ASGI scope (the MCP observer finds it through the request).
SCOPE_KEY = "mcp_oauth.request_log"

#: Longest client-chosen text (the tool name) put in a record, in characters; longer is cut.
MAX_FIELD_LENGTH = 256

#: What a line must not carry raw (escaped as ``\\uXXXX`` when present): DEL and the C1 controls
#: (``\\x9b`` is an 8-bit CSI a terminal may run), the line and paragraph separators, and lone
#: surrogates (no UTF-8 handler writes them). JSON already escapes C0 (newlines, ESC).
_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")

#: The record of the request being served (a dict the lane logs when the request ends); None outside one.
_current: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("mcp_oauth_request_log", default=None)

_otel_trace: Any = None
_otel_checked = False


def trace_id() -> str | None:
    """The current OpenTelemetry trace id (32 hex digits), or None: no span, or opentelemetry not
    installed (it is imported on the first call only when it is installed)."""
    global _otel_trace, _otel_checked
    if not _otel_checked:
        _otel_checked = True
        if importlib.util.find_spec("opentelemetry") is not None:
            from opentelemetry import trace

            _otel_trace = trace
    if _otel_trace is None:
        return None
    context = _otel_trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def annotate(**fields: Any) -> None:
    """Set fields of the current request's record (no effect outside a logged request)."""
    entry = _current.get()
    if entry is not None:
        entry.update(fields)


def request_log_lane(app: ASGIApp) -> ASGIApp:
    """Wrap an ASGI application: one JSON record per HTTP request while ``REQUEST_LOG_ENABLED``.

    With the setting off when the application is built, ``app`` itself is returned (no cost at all).
    """
    if not mcp_oauth_settings.REQUEST_LOG_ENABLED:
        return app

    async def lane(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not mcp_oauth_settings.REQUEST_LOG_ENABLED:
            await app(scope, receive, send)
            return
        entry: dict[str, Any] = dict.fromkeys(FIELDS)
        entry["method"] = scope.get("method")
        entry["path"] = scope.get("path")
        entry["status"] = 0
        entry["trace_id"] = trace_id()
        scope[SCOPE_KEY] = entry  # for the MCP observer: the MCP handler runs in a context of its own
        token = _current.set(entry)
        started = time.perf_counter()

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
            await send(message)

        try:
            await app(scope, receive, capture)
        finally:
            _current.reset(token)
            entry["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
            logger.info(
                "%s %s %s", entry["method"], _printable(entry["path"]), entry["status"], extra={"request": entry}
            )

    return lane


class RequestLogObserver:
    """MCP request observer: puts the JSON-RPC method, target, client and user on the record."""

    def start(self, call: Any) -> None:
        entry = _entry_of(call)
        if entry is not None and entry["trace_id"] is None:
            entry["trace_id"] = trace_id()  # a tracing observer installed first made its span current

    def finish(self, token: Any, event: Any) -> None:
        entry = _entry_of(event.call)
        if entry is None:
            return
        call = event.call
        entry["mcp_method"] = call.method
        entry["tool"] = event.target[:MAX_FIELD_LENGTH] if isinstance(event.target, str) else None
        principal = call.principal
        if principal is not None:
            entry["client_id"] = principal.client_id
            entry["user_id"] = getattr(principal.user, "pk", None)


def _printable(value: Any) -> Any:
    """``value`` for a plain-text message: non-printable characters (newlines, ESC, C1, lone
    surrogates) as Python escapes, so a client's path never starts a forged line."""
    if not isinstance(value, str) or value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in value)


def _entry_of(call: Any) -> dict[str, Any] | None:
    """The record of the HTTP request that carried ``call`` (the MCP handler runs in a fresh
    context, so it is found through the request's ASGI scope, not the context variable)."""
    scope = getattr(call.http_request, "scope", None)
    return scope.get(SCOPE_KEY) if isinstance(scope, dict) else None


#: The one observer instance (installed while the log is on).
observer = RequestLogObserver()


def _audit(sender: Any, event: Any, **kwargs: Any) -> None:
    if event.kind in ("token.issued", "token.refreshed", "client.registered") and _current.get() is not None:
        annotate(client_id=event.client_id or None, user_id=event.user_id)


def connect(audit_event: Any) -> None:
    """Connect the token endpoint's receiver to ``audit_event`` (:data:`mcp_oauth.audit.audit_event`,
    passed by :mod:`mcp_oauth.wiring`: this module is named in ``LOGGING`` for its formatter, so it
    imports no model)."""
    audit_event.connect(_audit, dispatch_uid="mcp_oauth.observability.request_log.audit")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (ISO 8601, UTC, milliseconds), ``level``, ``logger``,
    ``message``, then the record's ``request`` fields (:data:`FIELDS`) when it has them, and
    ``exception`` (the formatted traceback) when it carries one. Non-ASCII text is written as is,
    unless the line holds DEL, a C1 control, U+2028/U+2029 or a lone surrogate: then every
    non-ASCII character is escaped (one line any UTF-8 handler writes and a terminal shows
    inertly). Use it in ``LOGGING``::

        "formatters": {"json": {"()": "mcp_oauth.observability.request_log.JsonFormatter"}}
    """

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        line: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request = getattr(record, "request", None)
        if isinstance(request, dict):
            line.update(request)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        text = json.dumps(line, default=str, ensure_ascii=False)
        if _UNSAFE.search(text):  # rare: the line again with every non-ASCII character escaped
            text = json.dumps(line, default=str, ensure_ascii=True)
        return text
