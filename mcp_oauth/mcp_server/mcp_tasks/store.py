"""The task rows: creation, the owner-bound lookup, ``inputResponses``, cancellation, the wire shape.

Everything here is synchronous ORM code (the handlers call it through ``sync_to_async``).
SEP-2663 "Security Considerations": a task is found only by the user, client and resource of
the token that created it; any other caller gets the answer of an unknown id (-32602).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from mcp_oauth.mcp_server.mcp_tasks.policy import TaskPolicy
from mcp_oauth.mcp_server.transport import wakeup
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError
from mcp_oauth.models import McpTask
from mcp_oauth.resource_server.authentication import BearerPrincipal, PrincipalGone, principal_gone
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.signals import task_created, task_finished

__all__ = [
    "EXTENSION",
    "cancel_revoked_tasks",
    "cancel_task",
    "create_task",
    "detailed_task",
    "find_task",
    "iso",
    "publish_task",
    "task_topic",
    "record_input_responses",
    "stored_result",
]

logger = logging.getLogger("mcp_oauth.mcp_tasks")

#: The extension identifier (SEP-2663 "Extension Identifier").
EXTENSION = "io.modelcontextprotocol/tasks"

NOT_FOUND = "Failed to retrieve task: Task not found"
EXPIRED = "Failed to retrieve task: Task has expired"


def iso(moment: datetime) -> str:
    """An ISO 8601 UTC timestamp with milliseconds and ``Z`` (``2026-07-28T10:30:00.000Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _owner_filter(principal: Any) -> dict[str, Any]:
    user = getattr(principal, "user", None)
    application = getattr(principal, "application", None)
    return {
        "user_id": getattr(user, "pk", None),
        "application_id": getattr(application, "pk", None),
        "resource_id": principal.resource.pk,
        "organization_id": getattr(getattr(principal, "organization", None), "pk", None),
    }


def find_task(task_id: Any, principal: Any, *, for_update: bool = False) -> McpTask:
    """The task ``task_id`` of ``principal``'s user, client, resource and organization.

    :raises McpError: -32602 "Task not found" (unknown, or another owner's: the same answer) or
        "Task has expired" (past its ``ttlMs``; SEP-2663 "Protocol Errors").
    :raises PrincipalGone: not found because the token's user, client or row is gone (401).
    """
    if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
        raise McpError(INVALID_PARAMS, NOT_FOUND)
    queryset = McpTask.objects.select_for_update() if for_update else McpTask.objects
    task = queryset.filter(task_id=task_id).first()
    if task is None:
        if isinstance(principal, BearerPrincipal) and principal_gone(principal):
            raise PrincipalGone  # the task went with the user or client: 401, not "not found"
        raise McpError(INVALID_PARAMS, NOT_FOUND)
    owner = _owner_filter(principal)
    if (task.user_id, task.application_id, task.resource_id, task.organization_id) != (
        owner["user_id"],
        owner["application_id"],
        owner["resource_id"],
        owner["organization_id"],  # another organization's task: not found, alike
    ):
        raise McpError(INVALID_PARAMS, NOT_FOUND)
    if task.is_expired:
        raise McpError(INVALID_PARAMS, EXPIRED)
    return task


def create_task(
    principal: Any,
    tool_name: str,
    arguments: Mapping[str, Any],
    policy: TaskPolicy,
    *,
    protocol_version: str,
    client_capabilities: Mapping[str, Any],
    settled: Mapping[str, Any] | None = None,
    dispatch: Callable[[int], None],
) -> McpTask:
    """Write the task row (committed when this returns, so ``tasks/get`` finds it: SEP-2663
    "Task Creation") and hand its pk to ``dispatch`` (the executor) once committed; sends
    :data:`task_created`."""
    now = timezone.now()
    ttl_ms = policy.ttl_ms if policy.ttl_ms is not None else mcp_oauth_settings.TASKS_TTL_MS
    poll_ms = policy.poll_interval_ms or int(mcp_oauth_settings.TASKS_POLL_INTERVAL_MS)
    owner = _owner_filter(principal)
    with transaction.atomic():
        task = McpTask.objects.create(
            tool_name=tool_name,
            arguments=dict(arguments),
            scopes=" ".join(sorted(principal.scopes)),
            protocol_version=protocol_version,
            client_capabilities=dict(client_capabilities),
            created_at=now,
            updated_at=now,
            ttl_ms=int(ttl_ms) if ttl_ms is not None else None,
            poll_interval_ms=int(poll_ms),
            expires_at=now + timedelta(milliseconds=int(ttl_ms)) if ttl_ms is not None else None,
            input_state={"settled": dict(settled or {})},
            queued_at=now,
            max_retries=policy.max_retries,
            status_message="The task is queued.",
            **owner,
        )
        transaction.on_commit(lambda: dispatch(task.pk))
        transaction.on_commit(lambda: task_created.send(sender=McpTask, task=task))
    return task


def stored_result(task: McpTask) -> dict[str, Any] | None:
    """The task's result (decrypted when it was stored encrypted)."""
    if task.sealed_result:
        cipher = mcp_oauth_settings.TASKS_RESULT_CIPHER
        return json.loads(cipher.decrypt(task.sealed_result))
    return task.result


def detailed_task(task: McpTask) -> dict[str, Any]:
    """The task as ``DetailedTask`` (SEP-2663 "Task Status"): the ``Task`` fields plus
    ``inputRequests`` / ``result`` / ``error`` by status. Also the body of ``notifications/tasks``."""
    data: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": iso(task.created_at),
        "lastUpdatedAt": iso(task.updated_at),
        "ttlMs": task.ttl_ms,
    }
    if task.poll_interval_ms:
        data["pollIntervalMs"] = task.poll_interval_ms
    if task.status_message:
        data["statusMessage"] = task.status_message
    if task.status == McpTask.Status.INPUT_REQUIRED:
        data["inputRequests"] = dict(task.input_requests or {})
    elif task.status == McpTask.Status.COMPLETED:
        data["result"] = stored_result(task) or {"content": []}
    elif task.status == McpTask.Status.FAILED:
        data["error"] = dict(task.error or {"code": -32603, "message": "Internal error"})
    return data


def record_input_responses(
    task_id: str, principal: Any, responses: Mapping[str, Any], dispatch: Callable[[int], None]
) -> McpTask:
    """``tasks/update``: keep the answers to keys that are outstanding (others are ignored:
    SEP-2663 "Task Update Requests"); when none is left outstanding the task goes back to
    ``working`` and to the executor.

    :raises McpError: -32602 for an unknown, foreign or expired task, or an outstanding key
        answered with something that is not an object (an ``InputResponse`` is an
        ``ElicitResult``, ``CreateMessageResult`` or ``ListRootsResult``); nothing is recorded then.
    """
    with transaction.atomic():
        task = find_task(task_id, principal, for_update=True)
        if task.status != McpTask.Status.INPUT_REQUIRED:
            return task
        outstanding = dict(task.input_requests or {})
        state = dict(task.input_state or {})
        wire = dict(state.get("wire") or {})
        answered = dict(state.get("responses") or {})
        taken = [key for key in outstanding if key in responses]
        for key in taken:  # an InputResponse is an object (ElicitResult, CreateMessageResult, ListRootsResult)
            if not isinstance(responses[key], Mapping):
                raise McpError(
                    INVALID_PARAMS,
                    f"Invalid params: inputResponses[{key!r}] must be an object (the answer to the input request)",
                )
        if not taken:
            return task
        for key in taken:
            answered[wire.get(key, key)] = responses[key]
            outstanding.pop(key)
        state["responses"] = answered
        task.input_state = state
        task.input_requests = outstanding
        task.updated_at = timezone.now()
        fields = ["input_state", "input_requests", "updated_at"]
        if not outstanding:
            task.status = McpTask.Status.WORKING
            task.status_message = "The task is queued."
            task.queued_at = task.updated_at
            fields += ["status", "status_message", "queued_at"]
            transaction.on_commit(lambda: dispatch(task.pk))
        task.save(update_fields=fields)
    publish_task(task)
    return task


def cancel_task(task: McpTask, *, reason: str = "The task was cancelled.") -> bool:
    """Ask ``task`` to stop (SEP-2663 "Task Cancellation": cooperative). A task no executor runs
    (queued, or waiting for input) is ``cancelled`` at once and never started; a running one is
    flagged and its executor cancels the tool at its next check. A terminal task is left as is.

    :returns: True when the task is (or will be) cancelled.
    """
    now = timezone.now()
    with transaction.atomic():
        row = McpTask.objects.select_for_update().filter(pk=task.pk).first()
        if row is None or row.is_terminal:
            return False
        if row.cancel_requested_at is None:
            row.cancel_requested_at = now
        fields = ["cancel_requested_at"]
        if not row.lease:
            row.status = McpTask.Status.CANCELLED
            row.status_message = reason[:500]
            row.finished_at = now
            row.updated_at = now
            row.input_requests = {}
            fields += ["status", "status_message", "finished_at", "updated_at", "input_requests"]
        row.save(update_fields=fields)
    if row.is_terminal:
        finished(row)
    return True


def finished(task: McpTask) -> None:
    """Tell the world ``task`` reached a terminal status: :data:`task_finished`, ``notifications/tasks``."""
    publish_task(task)
    responses = task_finished.send_robust(sender=McpTask, task=task)
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error("task_finished receiver %r failed", receiver, exc_info=response)


def task_topic(task_id: str) -> str:
    """Wake-up topic of a task's status (:mod:`mcp_oauth.mcp_server.transport.wakeup`)."""
    return f"task:{task_id}"


def publish_task(task: McpTask) -> None:
    """Ring the wake-up of ``task`` (any process: a Celery worker reaches the web workers through
    ``MCP_OAUTH["WAKEUP_URL"]``); the ``subscriptions/listen`` streams that asked for its id read
    the row and send ``notifications/tasks``. Deferred to the commit inside a transaction."""
    wakeup.publish_on_commit(task_topic(task.task_id))


def cancel_revoked_tasks(sender: Any, user: Any, application: Any = None, **kwargs: Any) -> int:
    """Receiver of :data:`~mcp_oauth.signals.user_grants_revoked`: the tasks of ``user`` (with
    ``application``, or every client) that are not finished are cancelled; the grant that made
    them is gone. :returns: how many."""
    if getattr(user, "pk", None) is None:
        return 0
    tasks = McpTask.objects.filter(user_id=user.pk).exclude(status__in=McpTask.TERMINAL)
    if application is not None:
        tasks = tasks.filter(application_id=application.pk)
    return sum(cancel_task(task, reason="The user's grant to the client was revoked.") for task in tasks)
