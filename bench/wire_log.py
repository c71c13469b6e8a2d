"""What one process sends to PostgreSQL and Redis while it is switched on: every statement and
command, counted, timed (PostgreSQL) and kept with one sample of its parameters, for a bench that
wants the per-call traffic of its warm calls (``bench/organizations.py --in-process --wire``).

Hooks at the drivers, below Django and the caches, so nothing escapes it: psycopg's
``Cursor.execute``/``executemany``/``copy`` (Django's cursors, the pool's checks, the audit
writer's ``COPY``; every thread) and redis-py's command packers (sync and asyncio clients, the lean
reads, pipelines). :func:`explain` then runs ``EXPLAIN (ANALYZE, BUFFERS)`` of each sampled
statement on this process's database (writes inside a transaction rolled back).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["WireLog", "explain", "redis_shape"]

#: Long opaque segments of a Redis key (token checksums, session ids): one shape per key kind.
_OPAQUE = re.compile(r"[A-Za-z0-9_+/=-]{20,}")


def redis_shape(args: tuple[Any, ...]) -> str:
    """``COMMAND key-shape [+n keys]`` of one Redis command (its arguments as packed)."""

    def text(value: Any) -> str:
        return value.decode(errors="replace") if isinstance(value, (bytes, bytearray)) else str(value)

    if not args:
        return "?"
    name = text(args[0]).upper()
    if len(args) < 2:
        return name
    shape = f"{name} {_OPAQUE.sub('…', text(args[1]))}"
    if name in ("MGET", "DEL", "EXISTS") and len(args) > 2:
        shape += f" [+{len(args) - 2} keys: " + ", ".join(_OPAQUE.sub("…", text(a)) for a in args[2:]) + "]"
    return shape


class WireLog:
    """Counts of statements (``sql``) and commands (``redis``) while :attr:`on`; ``seconds``: the
    wall time of each statement's ``execute`` summed (round trip + server time); ``samples``: one
    ``(sql, params)`` per statement."""

    def __init__(self) -> None:
        self.on = False
        self.sql: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.samples: dict[str, Any] = {}
        self.redis: Counter[str] = Counter()
        self._lock = threading.Lock()

    def take(self) -> dict[str, Any]:
        """What was logged so far (``sql``: ``{statement: [count, seconds]}``, ``redis``:
        ``{command: count}``, ``samples``), then a fresh start."""
        with self._lock:
            taken = {
                "sql": {sql: [count, self.seconds[sql]] for sql, count in self.sql.items()},
                "redis": dict(self.redis),
                "samples": dict(self.samples),
            }
            self.sql, self.seconds, self.samples, self.redis = Counter(), defaultdict(float), {}, Counter()
        return taken

    def _statement(self, sql: Any, params: Any, seconds: float) -> None:
        key = sql if isinstance(sql, str) else sql.decode() if isinstance(sql, bytes) else repr(sql)
        with self._lock:
            self.sql[key] += 1
            self.seconds[key] += seconds
            self.samples.setdefault(key, params)

    def install(self) -> WireLog:
        import psycopg
        import redis.connection

        log = self
        cursor = psycopg.Cursor
        execute, executemany, copy = cursor.execute, cursor.executemany, cursor.copy

        def logged_execute(self: Any, query: Any, params: Any = None, *args: Any, **kwargs: Any) -> Any:
            if not log.on:
                return execute(self, query, params, *args, **kwargs)
            started = time.perf_counter()
            try:
                return execute(self, query, params, *args, **kwargs)
            finally:
                log._statement(query, params, time.perf_counter() - started)

        def logged_executemany(self: Any, query: Any, params_seq: Any, *args: Any, **kwargs: Any) -> Any:
            if log.on:
                log._statement(query, None, 0.0)
            return executemany(self, query, params_seq, *args, **kwargs)

        @contextmanager
        def logged_copy(self: Any, statement: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            started = time.perf_counter()  # the block's wall time: the rows written, then the end of COPY
            with copy(self, statement, *args, **kwargs) as copying:
                yield copying
            if log.on:
                log._statement(statement, None, time.perf_counter() - started)

        cursor.execute = logged_execute  # type: ignore[method-assign]
        cursor.executemany = logged_executemany  # type: ignore[method-assign]
        cursor.copy = logged_copy  # type: ignore[method-assign]

        for serializer in (redis.connection.HiredisRespSerializer, redis.connection.PythonRespSerializer):
            pack = serializer.pack

            def logged_pack(self: Any, *args: Any, _pack: Any = pack) -> Any:
                if log.on:
                    with log._lock:
                        log.redis[redis_shape(args)] += 1
                return _pack(self, *args)

            serializer.pack = logged_pack  # type: ignore[method-assign]
        return self


def explain(samples: dict[str, Any]) -> dict[str, str]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of each sampled statement on the default database
    (``COPY`` and transaction control left out; writes rolled back, a write that fails: its plan
    without ``ANALYZE``): ``{sql: plan text}``."""
    from django.db import DatabaseError, connection, transaction

    plans = {}
    for sql, params in samples.items():
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        if verb not in ("SELECT", "UPDATE", "INSERT", "DELETE", "WITH"):
            continue
        for prefix in ("EXPLAIN (ANALYZE, BUFFERS) ", "EXPLAIN "):  # the plan alone: a write that conflicts
            try:
                with transaction.atomic(), connection.cursor() as cursor:
                    cursor.execute(prefix + sql, params)
                    plans[sql] = "\n".join(row[0] for row in cursor.fetchall())
                    transaction.set_rollback(True)
                break
            except DatabaseError as error:
                plans[sql] = f"({prefix.strip()}: {str(error).splitlines()[0]})"
    return plans
