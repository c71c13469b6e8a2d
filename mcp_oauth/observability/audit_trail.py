"""The tool-call audit trail: an observer of the MCP endpoint that records every audited request.

:class:`AuditTrailObserver` is installed by :mod:`mcp_oauth.wiring` when ``TOOL_CALL_AUDIT`` is on
(the default). For each request of a method in ``TOOL_CALL_AUDIT_METHODS`` (``tools/call``), its
``finish`` appends one tuple to the process's :class:`TrailWriter` queue: no I/O, no JSON, no hashing
on the request path. The writer's thread turns the queue into :class:`~mcp_oauth.models.ToolCallRecord`
rows, ``TOOL_CALL_AUDIT_BATCH_SIZE`` at a time with one ``bulk_create`` (one ``INSERT``), every
``TOOL_CALL_AUDIT_FLUSH_MILLISECONDS`` or as soon as a batch is full; then, once per batch and per
client, it moves the "last used" times forward (``ClientProfile.last_used_at`` and
:class:`~mcp_oauth.models.ToolCallUse`). The digest of the arguments (HMAC-SHA256 of their canonical
JSON, keyed from ``SECRET_KEY``) and the adapter's :meth:`~mcp_oauth.adapter.DefaultMCPAdapter.redact_tool_arguments` run there too.

Bounds and losses (docs/how-to/audit-trail.md):

* the queue holds at most ``TOOL_CALL_AUDIT_QUEUE_SIZE`` records; when it is full a record is
  counted (:attr:`TrailWriter.dropped`) and dropped: a request never waits for the database;
* on a normal exit (``SIGTERM``: the server drains, then the interpreter exits) the ``atexit``
  hook writes what is queued; when the worker starts draining the writer is woken at once;
* a crash (``SIGKILL``, out of memory) loses what was queued and not yet written: at most one flush
  interval of calls (or one batch in flight), measured in bench/audit_crash.py;
* a batch the database refuses is logged and counted (:attr:`TrailWriter.failed`), not retried.

The writer's thread is started by the first record of each process (a forked child starts afresh:
the parent's queued records are the parent's to write).
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import close_old_connections, connections, transaction
from django.db.models import Q

from mcp_oauth.models import ClientProfile, ToolCallRecord, ToolCallUse
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.text import storable_text

try:  # the trace of the request, when OpenTelemetry is installed and a span is current
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - optional
    _otel_trace = None  # type: ignore[assignment]

__all__ = [
    "AuditTrailObserver",
    "TrailWriter",
    "arguments_digest",
    "canonical_json",
    "observer",
    "storable_json",
    "writer",
]

logger = logging.getLogger("mcp_oauth.audit_trail")

#: One queued call: (started_at, user_pk, client_id, resource, tool, method, era, protocol_version,
#: outcome, error_code, duration_s, arguments, trace_id, organization_pk).
Entry = tuple[float, Any, str, str, str, str, str, str, str, "int | None", float, Any, str, Any]


#: The canonical JSON encoder (one instance: ``json.dumps`` with these options builds one per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON: sorted keys, no spaces, UTF-8 (non-ASCII kept as is)."""
    return _CANONICAL.encode(value).encode()


def arguments_digest(arguments: Any) -> str:
    """HMAC-SHA256 (64 hex digits) of the canonical JSON of ``arguments`` (``{}`` when absent),
    keyed by a key derived from ``SECRET_KEY``.

    Two calls with the same arguments have the same digest (they can be matched), but the digest
    cannot be guessed back by whoever reads the trail: a plain SHA-256 of ``{"password": "hunter2"}``
    falls to a dictionary in seconds, the arguments the redaction hides included. Rotating
    ``SECRET_KEY`` starts a new series of digests. A lone surrogate (which JSON text can carry as
    ``\\udXXX``) is hashed as its UTF-8 form (``surrogatepass``)."""
    value = {} if arguments is None else arguments
    text = _CANONICAL.encode(value)
    digest = _keyed_hmac().copy()  # the key's two padded blocks hashed once per key, not per row
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


_digest_keys: dict[str, Any] = {}


def _digest_key() -> bytes:
    secret = str(django_settings.SECRET_KEY)
    return hashlib.sha256(b"mcp_oauth.audit_trail.arguments_digest\x00" + secret.encode()).digest()


def _keyed_hmac() -> Any:
    """An HMAC-SHA256 keyed with :func:`_digest_key`, fed nothing yet (copied for each digest)."""
    secret = str(django_settings.SECRET_KEY)
    keyed = _digest_keys.get(secret)
    if keyed is None:
        keyed = hmac.new(_digest_key(), digestmod=hashlib.sha256)
        _digest_keys.clear()
        _digest_keys[secret] = keyed
    return keyed


def storable_json(value: Any) -> Any:
    """``value`` with :func:`storable_text` applied to every string and object key (non-JSON values
    as their ``str``).

    :raises RecursionError: nesting deeper than the interpreter's recursion limit.
    """
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {storable_text(str(key)): storable_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable_json(item) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return storable_text(str(value))


class TrailWriter:
    """The per-process queue of calls and the thread that writes them in batches.

    :attr:`enqueued`, :attr:`written`, :attr:`dropped` (queue full) and :attr:`failed` (refused by
    the database) count records since the process started.
    """

    def __init__(self) -> None:
        self._reset()
        self._atexit = False
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        """A fresh state (also in a forked child: the parent's thread, locks and queued records,
        which the parent writes, stay with the parent)."""
        self._queue: deque[Entry] = deque()
        self._wake = threading.Event()
        self._done = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = self._release = False
        self.enqueued = self.written = self.dropped = self.failed = 0

    # -- the request path ------------------------------------------------------------------
    def put(self, entry: Entry) -> None:
        """Queue one call (never blocks; counts and drops it when the queue is full)."""
        queue = self._queue
        if len(queue) >= mcp_oauth_settings.TOOL_CALL_AUDIT_QUEUE_SIZE:
            self.dropped += 1
            return
        queue.append(entry)
        self.enqueued += 1
        if self._thread is None:
            self._start()
        elif len(queue) >= mcp_oauth_settings.TOOL_CALL_AUDIT_BATCH_SIZE:
            self._wake.set()

    # -- the thread ------------------------------------------------------------------------
    def _start(self) -> None:
        with self._done:
            if self._thread is not None:
                return
            self._stopping = False
            thread = threading.Thread(target=self._run, name="mcp-audit-trail", daemon=True)
            thread.start()
            self._thread = thread
            if not self._atexit:
                atexit.register(self.stop)
                self._atexit = True

    def _run(self) -> None:
        interval = mcp_oauth_settings.TOOL_CALL_AUDIT_FLUSH_MILLISECONDS / 1000
        while True:
            woken = self._wake.wait(interval)
            self._wake.clear()
            stopping, release = self._stopping, self._release
            if self._queue:
                try:
                    self._drain()
                except Exception:  # never end the thread: the next calls are to be written
                    logger.exception("tool-call audit trail: the writer failed a drain")
            elif not woken:
                release = True  # a whole interval without a call: idle
            if release or stopping:
                # Idle (or asked): the connection goes back to the pool, or is closed. A busy writer
                # keeps it: opening one per batch would cost more than the batch.
                self._release = False
                connections["default"].close()
            if stopping:
                return

    def _drain(self) -> None:
        size = max(1, int(mcp_oauth_settings.TOOL_CALL_AUDIT_BATCH_SIZE))
        queue = self._queue
        try:
            close_old_connections()  # CONN_MAX_AGE and a connection the server closed, as per request
            while queue:
                batch = [queue.popleft() for _ in range(min(size, len(queue)))]
                self._write(batch)
        finally:
            with self._done:
                self._done.notify_all()

    def _write(self, batch: list[Entry]) -> None:
        keep_arguments = mcp_oauth_settings.TOOL_CALL_AUDIT_ARGUMENTS
        adapter = mcp_oauth_settings.adapter if keep_arguments else None
        rows = []
        for (
            started,
            user,
            client_id,
            resource,
            tool,
            method,
            era,
            version,
            outcome,
            code,
            duration,
            args,
            trace,
            organization,
        ) in batch:
            tool = storable_text(tool)
            stored = None
            if adapter is not None:
                try:
                    stored = storable_json(adapter.redact_tool_arguments(tool, args if args is not None else {}))
                except Exception:
                    stored = None
                    logger.exception("redact_tool_arguments failed for %r; arguments not kept", tool)
            try:
                digest = arguments_digest(args)
            except (RecursionError, ValueError, TypeError):  # nesting too deep to encode
                digest = arguments_digest(repr(type(args)))
                logger.warning("tool-call audit trail: arguments of %r not hashable as JSON", tool)
            rows.append(
                (
                    datetime.fromtimestamp(started, tz=UTC),
                    user,
                    storable_text(client_id)[:255],
                    storable_text(resource)[:255],
                    tool[:200],
                    storable_text(method)[:40],
                    storable_text(era)[:16],
                    storable_text(version)[:16],
                    outcome,
                    code,
                    round(duration * 1000, 3),
                    digest,
                    stored,
                    trace,
                    organization,
                )
            )
        try:
            _insert(rows)
        except Exception:
            self.failed += len(rows)
            logger.exception("tool-call audit trail: a batch of %d records was not written", len(rows))
            connections["default"].close()
            return
        self.written += len(rows)
        try:
            _touch_last_used((row[0], row[1], row[2]) for row in rows)
        except Exception:
            logger.exception("tool-call audit trail: last-used times not updated")

    # -- control ---------------------------------------------------------------------------
    def wake(self) -> None:
        """Ask the thread to write what is queued now (e.g. when the worker starts draining)."""
        self._wake.set()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued before this call is written (or refused). :returns: False on timeout."""
        target = self.enqueued
        if self._thread is None and self._queue:
            self._start()  # records queued while no thread ran (one that ended: stop())
        deadline = time.monotonic() + timeout
        with self._done:
            while self.written + self.failed < target:
                if self._thread is None or not self._thread.is_alive():
                    return False
                self._wake.set()
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._done.wait(min(remaining, 0.05)):
                    if time.monotonic() >= deadline:
                        return False
        self._release = True  # a caller waiting for the rows is done with the trail for now
        self._wake.set()
        return True

    def stop(self, timeout: float = 10.0) -> None:
        """Write what is queued and end the thread (``atexit``; tests)."""
        thread = self._thread
        if thread is None:
            return
        self._stopping = True
        self._wake.set()
        thread.join(timeout)
        with self._done:
            self._thread = None

    def pending(self) -> int:
        """Records queued and not yet written."""
        return len(self._queue)


#: The columns :func:`_insert` writes, in the order of a row.
COLUMNS = (
    "created_at",
    "user_id",
    "client_id",
    "resource",
    "tool",
    "method",
    "era",
    "protocol_version",
    "outcome",
    "error_code",
    "duration_ms",
    "arguments_digest",
    "arguments",
    "trace_id",
    "organization_id",
)


def _insert(rows: list[tuple[Any, ...]]) -> None:
    """Insert ``rows`` (tuples of :data:`COLUMNS`) in one statement: ``COPY`` on PostgreSQL (a few
    microseconds of CPU per row, where the ORM's ``bulk_create`` spends about 45 preparing each
    field), ``bulk_create`` elsewhere."""
    connection = connections["default"]
    if connection.vendor == "postgresql":
        from psycopg.types.json import Jsonb

        table = connection.ops.quote_name(ToolCallRecord._meta.db_table)
        sql = f"COPY {table} ({', '.join(COLUMNS)}) FROM STDIN"
        with connection.cursor() as cursor:  # one COPY statement: atomic on its own, one round trip
            with cursor.cursor.copy(sql) as copy:
                for row in rows:
                    if row[12] is not None:
                        row = (*row[:12], Jsonb(row[12]), *row[13:])
                    copy.write_row(row)
        return
    with transaction.atomic():
        ToolCallRecord.objects.bulk_create([ToolCallRecord(**dict(zip(COLUMNS, row, strict=True))) for row in rows])


#: "Last used" is written at most once per this many seconds per client (and per client and user) and
#: process; the times shown are the minute's (the validator writes ``ClientProfile.last_used_at`` at
#: token grants with the same resolution).
LAST_USED_RESOLUTION_SECONDS = 60
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_written: dict[Any, datetime] = {}


def _touch_last_used(calls: Iterable[tuple[datetime, Any, str]]) -> None:
    """Move ``ClientProfile.last_used_at`` (per client) and :class:`ToolCallUse` (per client and user)
    forward to the newest of ``calls`` (``(created_at, user_pk, client_id)``); never backward (another
    process may have written later)."""
    per_client: dict[str, datetime] = {}
    per_user: dict[tuple[Any, str], datetime] = {}
    for at, user_id, client_id in calls:
        if client_id not in per_client or at > per_client[client_id]:
            per_client[client_id] = at
        if user_id is not None:
            key = (user_id, client_id)
            if key not in per_user or at > per_user[key]:
                per_user[key] = at
    # At most one write per client (and per client and user) per LAST_USED_RESOLUTION_SECONDS and
    # process: each statement is a round trip on which the request thread may wait for the GIL.
    resolution = timedelta(seconds=LAST_USED_RESOLUTION_SECONDS)
    if len(_written) > 10_000:
        _written.clear()
    per_client = {key: at for key, at in per_client.items() if at - _written.get(key, _EPOCH) >= resolution}
    per_user = {key: at for key, at in per_user.items() if at - _written.get(key, _EPOCH) >= resolution}
    _written.update(per_client)
    _written.update(per_user)
    for client_id, at in per_client.items():
        ClientProfile.objects.filter(application__client_id=client_id).filter(
            Q(last_used_at__lt=at) | Q(last_used_at__isnull=True)
        ).update(last_used_at=at)
    for (user_id, client_id), at in per_user.items():
        if not ToolCallUse.objects.filter(user_id=user_id, client_id=client_id, last_used_at__lt=at).update(
            last_used_at=at
        ):
            ToolCallUse.objects.bulk_create(
                [ToolCallUse(user_id=user_id, client_id=client_id, last_used_at=at)], ignore_conflicts=True
            )


class AuditTrailObserver:
    """The observer (:mod:`mcp_oauth.mcp_server.transport.observers`): queues the audited calls."""

    def __init__(self, trail: TrailWriter) -> None:
        self.trail = trail

    def start(self, call: Any) -> str:
        """The trace id of the current OpenTelemetry span (32 hex digits), else ``""``."""
        if _otel_trace is not None:
            context = _otel_trace.get_current_span().get_span_context()
            if context.is_valid:
                return format(context.trace_id, "032x")
        return ""

    def finish(self, token: str, event: Any) -> None:
        call = event.call
        if call.method not in mcp_oauth_settings.TOOL_CALL_AUDIT_METHODS:
            return
        principal = call.principal
        user = principal.user
        application = principal.application
        if not token:
            token = _traceparent_id(call.http_request)
        params = call.params
        self.trail.put(
            (
                event.started_at,
                user.pk if user is not None else None,
                application.client_id if application is not None else "",
                principal.resource.uri,
                event.target or "",
                call.method,
                call.era,
                call.protocol_version or "",
                event.outcome,
                event.error_code,
                event.duration,
                params.get("arguments") if call.method == "tools/call" else None,
                token,
                getattr(getattr(principal, "organization", None), "pk", None),
            )
        )


def _traceparent_id(request: Any) -> str:
    """The trace id of a W3C ``traceparent`` header (``00-<32 hex>-<16 hex>-<2 hex>``), else ``""``."""
    meta = getattr(request, "META", None)
    value = meta.get("HTTP_TRACEPARENT") if meta else None
    if value and len(value) >= 55 and value[2] == "-":
        trace = value[3:35]
        if trace != "0" * 32 and all(c in "0123456789abcdef" for c in trace):
            return trace
    return ""


#: The process's writer and observer (installed by :mod:`mcp_oauth.wiring` when ``TOOL_CALL_AUDIT`` is on).
writer = TrailWriter()
observer = AuditTrailObserver(writer)
