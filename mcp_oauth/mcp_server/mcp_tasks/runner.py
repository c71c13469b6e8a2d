"""Running one task: claim the row, run the tool, store the outcome (on any executor).

:func:`run_task` is what an executor calls with the task's pk (a Celery worker through
:mod:`.jobs`, or a thread). It

1. **claims** the row: only a ``working`` task nobody holds is taken (a lease id and a heartbeat
   are written in the same transaction), so a duplicate delivery runs nothing; a task whose
   cancellation arrived before it started is ``cancelled`` and never started;
2. **runs** the tool with a :class:`~mcp_oauth.mcp_server.transport.context.ToolContext` rebuilt from the
   row (the token's user, client, scopes and resource; the era of the request; the declared
   client capabilities) while a thread of this process (:mod:`.heartbeat`, independent of the
   tool's event loop) writes the heartbeat and reads ``cancel_requested_at``: a cancel cancels
   the tool's coroutine (a sync tool reads ``ctx.task.cancelled``);
3. **stores** the outcome, only while it still holds the lease: a ``CallToolResult`` (also one
   with ``isError``) -> ``completed``; a JSON-RPC error (:class:`McpError`) -> ``failed`` with
   ``error``; :class:`InputRequired` -> ``input_required`` with ``inputRequests`` (the answers of
   ``tasks/update`` run the tool again from its start, like a multi round-trip retry: settled
   answers are kept, see :mod:`mcp_oauth.mcp_server.transport.input_required`); a cancel -> ``cancelled``.

Input keys are unique over the task's life (SEP-2663 "Task Update Requests"): a key asked again
after its answer was delivered (an invalid answer) goes out as ``<key>~2``, ``<key>~3``, ….
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import close_old_connections, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from mcp_oauth.mcp_server.mcp_tasks.heartbeat import Heartbeat, check_lease
from mcp_oauth.mcp_server.mcp_tasks.store import finished, publish_task
from mcp_oauth.mcp_server.transport.context import ToolContext
from mcp_oauth.mcp_server.transport.input_required import InputRequired, InputRound
from mcp_oauth.mcp_server.transport.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, McpError
from mcp_oauth.mcp_server.transport.wakeup import released
from mcp_oauth.models import McpTask
from mcp_oauth.resource_server.authentication import BearerPrincipal
from mcp_oauth.resource_server.organizations import enabled_tool_names
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.signals import tool_called

__all__ = ["TaskHandle", "run_task"]

logger = logging.getLogger("mcp_oauth.mcp_tasks")

Status = McpTask.Status


class TaskHandle:
    """What a tool running as a task sees as ``ctx.task``.

    * ``task_id``;
    * ``attempt`` (int ≥ 1): the number of this run of the task. It is 1 for the first run and
      grows when the task runs again from its start: after its worker was lost (``max_retries``)
      or after ``tasks/update`` answered its questions;
    * ``idempotency_key`` (str, 64 hex digits): the same for every run of this task and different
      for every task (an HMAC of the task id under ``SECRET_KEY``): hand it to an external API
      that de-duplicates requests, so a run after a lost worker does not repeat the effect;
    * ``cancelled`` (True once ``tasks/cancel`` or an admin asked it to stop, or once this run
      lost its lease: a long sync tool checks it between steps; an async tool is cancelled at
      its next ``await``);
    * ``lease_lost`` (True once the reconciler gave the task to another run: nothing this run
      produces is stored any more);
    * ``await holds_lease()`` (reads the row: True while this run holds the task and it was not
      cancelled; call it right before an irreversible step);
    * ``await set_status_message(text)`` (the ``statusMessage`` of ``tasks/get``, ≤ 500
      characters; written only while this run holds the lease).

    Only the run holding the task's lease writes its outcome, status message or questions
    (a run that lost it is fenced off); the lease is renewed by a thread of the worker
    (:mod:`.heartbeat`), not by the tool's event loop, so a tool that blocks its loop is not
    taken for lost.
    """

    def __init__(self, pk: int, task_id: str, lease: str, attempt: int = 1) -> None:
        self.pk = pk
        self.task_id = task_id
        self.attempt = attempt
        self._lease = lease
        self._cancelled = threading.Event()
        self._lost = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def lease_lost(self) -> bool:
        return self._lost.is_set()

    @property
    def idempotency_key(self) -> str:
        return salted_hmac("mcp_oauth.mcp_tasks.idempotency_key", self.task_id, algorithm="sha256").hexdigest()

    async def holds_lease(self) -> bool:
        holds, cancelled = await sync_to_async(released(check_lease), thread_sensitive=False)(
            self.pk, self._lease, False
        )
        if not holds:
            self._lost.set()
            self._cancelled.set()
        return holds and not cancelled

    async def set_status_message(self, text: str) -> None:
        await sync_to_async(released(_set_message), thread_sensitive=False)(self.pk, self._lease, str(text)[:500])


def _set_message(pk: int, lease: str, text: str) -> None:
    if McpTask.objects.filter(pk=pk, lease=lease).update(status_message=text, updated_at=timezone.now()):
        task = McpTask.objects.filter(pk=pk).first()
        if task is not None:
            publish_task(task)


@dataclass
class Outcome:
    status: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    message: str = ""
    input_requests: dict[str, Any] = field(default_factory=dict)
    input_state: dict[str, Any] | None = None
    is_error: bool = False


def claim(pk: int) -> tuple[McpTask, str] | None:
    """Take task ``pk`` for this executor: ``(row, lease)``, or None when there is nothing to run
    (gone, terminal, waiting for input, held by another executor, cancelled before it started, or
    given to another executor between this claim and its start)."""
    now = timezone.now()
    with transaction.atomic():
        task = McpTask.objects.select_for_update().filter(pk=pk).first()
        if task is None or task.status != Status.WORKING or task.lease:
            return None
        if task.cancel_requested_at is not None:
            task.status = Status.CANCELLED
            task.status_message = "The task was cancelled before it started."
            task.finished_at = task.updated_at = now
            task.save(update_fields=["status", "status_message", "finished_at", "updated_at"])
            never_started = task
            transaction.on_commit(lambda: finished(never_started))
            return None
        lease = task.lease = secrets.token_hex(16)
        task.heartbeat_at = now
        task.started_at = task.started_at or now
        task.attempts += 1
        task.status_message = "The task is running."
        task.updated_at = now
        task.save(update_fields=["lease", "heartbeat_at", "started_at", "attempts", "status_message", "updated_at"])
    # Read back with its owner after the commit: this process may have been stopped in between
    # (SIGSTOP, descheduled) for longer than the lease and the task given to another run. The run
    # holds the lease written above, never the row's: one that took the row's lease held the new
    # run's (its writes unfenced) and ran the tool a second time, as the new run's attempt.
    task = McpTask.objects.select_related("user", "application", "resource", "organization").filter(pk=pk).first()
    if task is None or task.lease != lease:
        logger.warning("task %s: given to another run before this one started", pk)
        return None
    publish_task(task)
    return task, lease


def run_task(pk: int, dispatch: Callable[[int], None]) -> str:
    """Run task ``pk`` here if it can be claimed; ``dispatch`` queues it again (a state-only
    input round). :returns: the status it was left in, ``"lost"`` when its lease was taken
    meanwhile, or ``"skipped"`` when there was nothing to run."""
    claimed = claim(pk)
    if claimed is None:
        return "skipped"
    task, lease = claimed
    handle = TaskHandle(task.pk, task.task_id, lease, attempt=task.attempts)
    heartbeat = Heartbeat(handle)
    heartbeat.start()
    try:
        outcome = asyncio.run(_execute(task, handle, heartbeat))
    except Exception as exc:  # the executor itself broke: the task fails, never hangs
        logger.exception("task %s broke its executor", task.task_id)
        outcome = Outcome(Status.FAILED, error={"code": INTERNAL_ERROR, "message": "Internal error"}, message=str(exc))
    finally:
        heartbeat.stop()
        close_old_connections()
    status = _store(task, lease, outcome)
    if status == Status.WORKING:
        dispatch(task.pk)
    return status


def _tool_registry() -> Any:
    return mcp_oauth_settings.TOOL_REGISTRY


def _principal(task: McpTask) -> BearerPrincipal:
    return BearerPrincipal(
        user=task.user,
        application=task.application,
        access_token=None,
        scopes=frozenset(task.scopes.split()),
        resource=task.resource,
        organization=task.organization,
    )


def _error(exc: McpError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return error


async def _execute(task: McpTask, handle: TaskHandle, heartbeat: Heartbeat) -> Outcome:
    tool = _tool_registry().get(task.tool_name)
    enabled = enabled_tool_names(task.organization)
    if tool is None or (enabled is not None and tool.name not in enabled):  # disabled since: unknown
        return Outcome(Status.FAILED, error={"code": INVALID_PARAMS, "message": f"Unknown tool: {task.tool_name}"})
    try:
        arguments = tool.validate_arguments(task.arguments)
    except ValueError as exc:
        return Outcome(Status.FAILED, error={"code": INVALID_PARAMS, "message": str(exc)})
    state = dict(task.input_state or {})
    ctx = ToolContext(
        principal=_principal(task),
        session=None,
        request=None,  # type: ignore[arg-type]
        request_id=task.task_id,
        protocol_version=task.protocol_version,
        tool_name=tool.name,
        era="modern",
        declared_capabilities=dict(task.client_capabilities or {}),
        arguments=dict(arguments),
        input_round=InputRound(
            asked=state.get("asked") or {}, responses=state.get("responses") or {}, settled=state.get("settled") or {}
        ),
        task=handle,
    )
    work = asyncio.ensure_future(tool.call(ctx, arguments))
    heartbeat.attach(asyncio.get_running_loop(), work)
    try:
        result: types.CallToolResult = await work
    except InputRequired as needed:
        return _input_required(state, needed, ctx.input_round)
    except McpError as exc:
        await _send_tool_called(tool, ctx.principal, is_error=True)
        return Outcome(Status.FAILED, error=_error(exc), message=f"The tool failed: {exc.message}"[:500])
    except asyncio.CancelledError:
        if not handle.cancelled:
            raise
        return Outcome(Status.CANCELLED, message="The task was cancelled.")
    finally:
        heartbeat.detach()
    await _send_tool_called(tool, ctx.principal, is_error=bool(result.is_error))
    data = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    message = "The tool reported an error." if result.is_error else "The task completed."
    return Outcome(Status.COMPLETED, result=data, message=message, is_error=bool(result.is_error))


async def _send_tool_called(tool: Any, principal: Any, *, is_error: bool) -> None:
    responses = await tool_called.asend_robust(sender=type(tool), tool=tool, principal=principal, is_error=is_error)
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("tool_called receiver %r failed", receiver, exc_info=response)


def _input_required(state: dict[str, Any], needed: InputRequired, input_round: InputRound | None) -> Outcome:
    issued = list(state.get("issued") or [])
    requests: dict[str, Any] = {}
    wire: dict[str, str] = {}
    for internal, request in needed.requests.items():
        key, n = internal, 1
        while key in issued:
            n += 1
            key = f"{internal}~{n}"
        issued.append(key)
        wire[key] = internal
        requests[key] = request
    settled = input_round.settled_values if input_round is not None else dict(state.get("settled") or {})
    new_state = {"asked": needed.asked, "settled": settled, "responses": {}, "wire": wire, "issued": issued}
    if not requests:  # a state-only round: run again at once
        return Outcome(Status.WORKING, input_state=new_state, message="The task is queued.")
    return Outcome(
        Status.INPUT_REQUIRED, input_requests=requests, input_state=new_state, message="The task needs input."
    )


def _seal(result: dict[str, Any]) -> str:
    return mcp_oauth_settings.TASKS_RESULT_CIPHER.encrypt(json.dumps(result, ensure_ascii=False))


def _store(task: McpTask, lease: str, outcome: Outcome) -> str:
    """Write ``outcome`` while the lease is still ours (else nothing: the task was given to
    another executor, or deleted). :returns: the status left."""
    tool = _tool_registry().get(task.tool_name)
    policy = getattr(tool, "task", None)
    now = timezone.now()
    with transaction.atomic():
        row = McpTask.objects.select_for_update().filter(pk=task.pk).first()
        if row is None or row.lease != lease or row.is_terminal:
            logger.warning("task %s: outcome dropped (the lease was lost)", task.task_id)
            return "lost"
        status = outcome.status
        if row.cancel_requested_at is not None and status in (Status.WORKING, Status.INPUT_REQUIRED):
            status = Status.CANCELLED
            outcome = Outcome(Status.CANCELLED, message="The task was cancelled.")
        row.status = status
        row.lease = ""
        row.heartbeat_at = None
        row.updated_at = now
        row.status_message = outcome.message[:500]
        if status == Status.COMPLETED:
            assert outcome.result is not None
            if policy is not None and policy.encrypt_result:
                row.sealed_result = _seal(outcome.result)
                row.result = None
            else:
                row.result = outcome.result
        elif status == Status.FAILED:
            row.error = outcome.error
        if status in (Status.INPUT_REQUIRED, Status.WORKING) and outcome.input_state is not None:
            row.input_state = outcome.input_state
        row.input_requests = outcome.input_requests if status == Status.INPUT_REQUIRED else {}
        if status == Status.WORKING:
            row.queued_at = now
        if row.is_terminal:
            row.finished_at = now
        row.save()
        if row.is_terminal:
            transaction.on_commit(lambda: finished(row))
        else:
            publish_task(row)
    return status
