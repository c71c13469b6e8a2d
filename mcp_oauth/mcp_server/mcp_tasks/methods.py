"""The extension's JSON-RPC surface: ``tasks/get``, ``tasks/update``, ``tasks/cancel`` and the
``tools/call`` hook that answers ``CreateTaskResult`` (SEP-2663).

Offered in the 2026-07-28 era only: the extension is negotiated per request
(``_meta["io.modelcontextprotocol/clientCapabilities"].extensions``), and a 2025-11-25 session has
no per-request capabilities ("A server MUST NOT return CreateTaskResult to a client that did not
include the extension capability on its request, regardless of prior declarations"). The
methods need the extension declared (-32021 with ``data.requiredCapabilities`` otherwise) and
the ``Mcp-Name`` header mirrors ``params.taskId`` (-32020 on a mismatch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.mcp_tasks import jobs
from mcp_oauth.mcp_server.mcp_tasks.store import (
    EXTENSION,
    cancel_revoked_tasks,
    cancel_task,
    create_task,
    detailed_task,
    find_task,
    record_input_responses,
)
from mcp_oauth.mcp_server.transport.extensions import client_extension, register_extension
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, McpError
from mcp_oauth.mcp_server.transport.table import MODERN, Call, MethodTable
from mcp_oauth.mcp_server.transport.wakeup import released
from mcp_oauth.models import McpTask
from mcp_oauth.signals import user_grants_revoked

__all__ = ["cancel", "defer_to_task", "get", "install", "update"]

CAPABILITY = ("extensions", EXTENSION)


def _task_id(call: Call) -> str:
    task_id = call.params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise McpError(INVALID_PARAMS, "Invalid params: taskId must be a non-empty string")
    return task_id


def _get(task_id: str, principal: Any) -> dict[str, Any]:
    task = find_task(task_id, principal)
    if task.status == McpTask.Status.WORKING and jobs.is_overdue(task):
        jobs.reconcile_task(task.pk)
        task = find_task(task_id, principal)
    return detailed_task(task)


async def get(call: Call) -> dict[str, Any]:
    """``tasks/get``: the task's ``DetailedTask`` (``resultType: "complete"``).

    :raises McpError: -32602 unknown, foreign or expired task.
    """
    return await sync_to_async(released(_get), thread_sensitive=False)(_task_id(call), call.principal)


async def update(call: Call) -> dict[str, Any]:
    """``tasks/update``: take ``inputResponses`` for outstanding keys; an empty acknowledgement.

    :raises McpError: -32602 unknown, foreign or expired task, or ``inputResponses`` not an object.
    """
    task_id = _task_id(call)
    responses = call.params.get("inputResponses")
    if not isinstance(responses, Mapping):
        raise McpError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
    await sync_to_async(released(record_input_responses), thread_sensitive=False)(
        task_id, call.principal, dict(responses), jobs.dispatch
    )
    return {}


def _cancel(task_id: str, principal: Any) -> None:
    cancel_task(find_task(task_id, principal), reason="The client cancelled the task.")


async def cancel(call: Call) -> dict[str, Any]:
    """``tasks/cancel``: ask the task to stop (cooperative); an empty acknowledgement, also for a
    task already terminal.

    :raises McpError: -32602 unknown, foreign or expired task.
    """
    await sync_to_async(released(_cancel), thread_sensitive=False)(_task_id(call), call.principal)
    return {}


def _required() -> McpError:
    return McpError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: this tool runs as a task ({EXTENSION})",
        {"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
    )


async def defer_to_task(call: Call, tool: Any, ctx: Any, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``tools/call`` hook: a ``CreateTaskResult`` when ``tool`` runs as a task for this
    request, else None (the tool runs inline).

    :raises McpError: -32021 for an ``always`` tool when the request did not declare the extension.
    :raises InputRequired: from the policy's ``prepare`` (answered as a multi round-trip round).
    """
    policy = getattr(tool, "task", None)
    if policy is None:
        return None
    declared = call.modern and client_extension(call.client_capabilities, EXTENSION) is not None
    if not declared:
        if policy.mode == "always" and call.modern:
            raise _required()
        return None
    if policy.prepare is not None:
        await policy.prepare(ctx, arguments)
    settled = ctx.input_round.settled_values if ctx.input_round is not None else {}
    task = await sync_to_async(released(create_task), thread_sensitive=False)(
        call.principal,
        tool.name,
        dict(call.params.get("arguments") or {}),
        policy,
        protocol_version=call.protocol_version,
        client_capabilities=call.client_capabilities,
        settled=settled,
        dispatch=jobs.dispatch,
    )
    created = detailed_task(task)
    created["resultType"] = "task"
    return created


def install(methods: MethodTable) -> None:
    """Register the methods on ``methods``, the extension, and the receiver cancelling the tasks
    of a revoked grant. The ``tools/call`` hook (:func:`defer_to_task`) and the
    ``subscriptions/listen`` one (:func:`~.listen.listen_tasks`) are installed in the transport by
    the composition module (:func:`mcp_oauth.mcp_server.features.install`, from ``MCPOAuthConfig.ready``)."""
    for name, handler in (("tasks/get", get), ("tasks/update", update), ("tasks/cancel", cancel)):
        methods.register(name, handler, eras={MODERN}, name_param="taskId", capability=CAPABILITY, replace=True)
    register_extension(EXTENSION, {}, eras={MODERN})
    user_grants_revoked.connect(cancel_revoked_tasks, dispatch_uid="mcp_oauth.mcp_server.mcp_tasks.revoked")
