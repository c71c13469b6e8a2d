"""The heartbeat of a running task: a thread of the worker process, not a coroutine of the tool's loop.

A task's lease is kept alive by writing ``heartbeat_at`` every ``TASKS_HEARTBEAT_SECONDS``; a
task without one for ``TASKS_LEASE_SECONDS`` is taken as lost by the reconciler
(:mod:`.jobs`). The beat used to run on the tool's own event loop, so an ``async def`` tool that
blocked that loop (``time.sleep``, a synchronous client library, a long CPU step) stopped its
own heartbeat and was declared lost while its worker was healthy. :class:`Heartbeat` runs in a
thread of its own with its own database connection (given back to the pool after every check),
so it beats whatever the tool does with its loop; the GIL is released by ``time.sleep`` and
switched every few milliseconds in pure-Python code.

Every ``TASKS_CANCEL_POLL_SECONDS`` it also reads the row: a cancellation request
(SEP-2663 "Task Cancellation") or a lease taken by the reconciler sets
``TaskHandle.cancelled`` (and ``lease_lost`` for the latter) and cancels the tool's coroutine at
its next ``await`` (scheduled on its loop with ``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from django.db import connection
from django.utils import timezone

from mcp_oauth.models import McpTask
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["Heartbeat", "check_lease"]

logger = logging.getLogger("mcp_oauth.mcp_tasks")


def check_lease(pk: int, lease: str, beat: bool) -> tuple[bool, bool]:
    """``(holds, cancelled)`` of task ``pk`` for the run holding ``lease``; writes the heartbeat
    first when ``beat`` (only while the lease is still ours: a fenced write)."""
    if beat:
        McpTask.objects.filter(pk=pk, lease=lease).update(heartbeat_at=timezone.now())
    row = McpTask.objects.filter(pk=pk).values("lease", "cancel_requested_at").first()
    holds = row is not None and row["lease"] == lease
    return holds, holds and row is not None and row["cancel_requested_at"] is not None


class Heartbeat:
    """Beats for one run of one task, from :meth:`start` to :meth:`stop`.

    :param handle: the run's :class:`~.runner.TaskHandle` (its ``pk``, lease and flags).
    """

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self._stopped = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._work: asyncio.Future | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"mcp-task-heartbeat-{handle.pk}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def attach(self, loop: asyncio.AbstractEventLoop, work: asyncio.Future) -> None:
        """The tool's coroutine (on ``loop``) to cancel when the task is cancelled or lost."""
        with self._lock:
            self._loop, self._work = loop, work
        if self.handle.cancelled:
            self._cancel_work()

    def detach(self) -> None:
        with self._lock:
            self._loop = self._work = None

    def stop(self, timeout: float = 10.0) -> None:
        """Stop beating and wait for the thread (at most ``timeout`` seconds)."""
        self._stopped.set()
        self.detach()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _cancel_work(self) -> None:
        with self._lock:
            loop, work = self._loop, self._work
        if loop is None or work is None:
            return
        try:
            loop.call_soon_threadsafe(work.cancel)
        except RuntimeError:  # the loop is closed: the run is over
            pass

    def _run(self) -> None:
        beat_every = float(mcp_oauth_settings.TASKS_HEARTBEAT_SECONDS)
        poll = max(0.05, min(float(mcp_oauth_settings.TASKS_CANCEL_POLL_SECONDS), beat_every))
        last_beat = time.monotonic()
        try:
            while not self._stopped.wait(poll):
                beat = time.monotonic() - last_beat >= beat_every
                try:
                    holds, cancelled = check_lease(self.handle.pk, self.handle._lease, beat)
                except Exception as exc:  # noqa: BLE001 - the database is away: try again at the next poll
                    logger.warning("task %s heartbeat failed: %s", self.handle.task_id, exc)
                    continue
                finally:
                    if not connection.in_atomic_block:
                        connection.close()  # back to the pool between beats
                if beat:
                    last_beat = time.monotonic()
                if not holds or cancelled:
                    if not holds:
                        self.handle._lost.set()
                    self.handle._cancelled.set()
                    self._cancel_work()
                    return
        finally:
            connection.close()
