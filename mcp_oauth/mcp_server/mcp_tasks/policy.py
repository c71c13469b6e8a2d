"""How a tool takes part in the Tasks extension: :class:`TaskPolicy` (``@tool(task=...)``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ALWAYS", "NEVER", "OPTIONAL", "TaskMode", "TaskPolicy", "as_policy"]

TaskMode = Literal["always", "optional", "never"]
#: Every call becomes a task; a request that did not declare the extension gets -32021.
ALWAYS: TaskMode = "always"
#: A task when the request declares the extension, else the tool runs inline (a plain result).
OPTIONAL: TaskMode = "optional"
#: Never a task (the default).
NEVER: TaskMode = "never"

#: ``async prepare(ctx, arguments)``: runs in the ``tools/call`` request before the task exists.
Prepare = Callable[[Any, Mapping[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class TaskPolicy:
    """A tool's task settings.

    :param mode: :data:`ALWAYS`, :data:`OPTIONAL` or :data:`NEVER`.
    :param max_retries: how often a task whose executor died (no heartbeat for
        ``MCP_OAUTH["TASKS_LEASE_SECONDS"]``) runs again from the start; after that it fails
        with -32603. 0 (default): a tool with side effects is never run twice.
    :param encrypt_result: keep the result encrypted at rest (``MCP_OAUTH["TASKS_RESULT_CIPHER"]``).
    :param ttl_ms: the task's ``ttlMs`` (milliseconds; None: ``MCP_OAUTH["TASKS_TTL_MS"]``).
    :param poll_interval_ms: ``pollIntervalMs`` (None: ``MCP_OAUTH["TASKS_POLL_INTERVAL_MS"]``).
    :param prepare: ``async prepare(ctx, arguments)`` run in the ``tools/call`` request before
        the task is created; it may ask the client through ``ctx.request_inputs`` (a multi
        round-trip ``input_required`` answered by retrying ``tools/call``). What it settled is
        handed to the task: the same keys asked again in the body are answered at once.
    """

    mode: TaskMode = OPTIONAL
    max_retries: int = 0
    encrypt_result: bool = False
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    prepare: Prepare | None = None

    def __post_init__(self) -> None:
        if self.mode not in (ALWAYS, OPTIONAL, NEVER):
            raise ValueError(f"task mode must be 'always', 'optional' or 'never', not {self.mode!r}")
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        for name in ("ttl_ms", "poll_interval_ms"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive integer of milliseconds")


def as_policy(value: TaskPolicy | str | bool | None) -> TaskPolicy | None:
    """``@tool(task=...)`` as a :class:`TaskPolicy`: a policy, a mode string, True (``optional``),
    or None/False/``"never"`` (None: not a task tool).

    :raises ValueError: another value.
    """
    if value is None or value is False:
        return None
    if value is True:
        return TaskPolicy(OPTIONAL)
    if isinstance(value, str):
        value = TaskPolicy(value)  # type: ignore[arg-type]
    if not isinstance(value, TaskPolicy):
        raise ValueError(f"task= takes a TaskPolicy, 'always', 'optional' or 'never', not {value!r}")
    return None if value.mode == NEVER else value
