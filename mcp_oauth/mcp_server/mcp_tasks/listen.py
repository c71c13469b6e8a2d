"""``notifications/tasks`` on ``subscriptions/listen`` (SEP-2663 "Task Status Notifications").

A listen request naming ``notifications.taskIds`` (and declaring the extension: -32021 otherwise)
is acknowledged with the ids the server agreed to: those of the caller's own live tasks (another
owner's id is left out, as an unknown one). The stream then gets ``notifications/tasks`` with the
task's full ``DetailedTask`` (what ``tasks/get`` would answer) at once and whenever it changes,
until the task is terminal. Changes are noticed through the wake-up channel
(:mod:`mcp_oauth.mcp_server.transport.wakeup`: a Celery worker's update reaches every web worker with
``MCP_OAUTH["WAKEUP_URL"]``), with a re-read every ``WAKEUP_SAFETY_POLL_SECONDS`` as a safety net.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.mcp_tasks.store import EXTENSION, detailed_task, find_task, task_topic
from mcp_oauth.mcp_server.transport.extensions import client_extension
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, JsonRpcError
from mcp_oauth.mcp_server.transport.table import Call
from mcp_oauth.mcp_server.transport.wakeup import hub, released
from mcp_oauth.models import McpTask
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["listen_tasks"]

MAX_TASK_IDS = 100
Sink = Callable[[dict[str, Any]], Awaitable[None]]


class _Doorbell:
    """One waiter per task topic, all ringing the same event (the :class:`~.wakeup.Waiter` protocol)."""

    def __init__(self, topic: str, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        self.topic = topic
        self._loop = loop
        self._event = event

    def _set_threadsafe(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._event.set)
        except RuntimeError:
            pass


def _owned(task_ids: list[str], principal: Any) -> list[str]:
    owned = []
    for task_id in task_ids:
        try:
            find_task(task_id, principal)
        except Exception:  # noqa: BLE001 - McpError: unknown, foreign or expired: not agreed to
            continue
        owned.append(task_id)
    return owned


def _states(task_ids: list[str], principal: Any) -> dict[str, dict[str, Any]]:
    states = {}
    for task_id in task_ids:
        try:
            states[task_id] = detailed_task(find_task(task_id, principal))
        except Exception:  # noqa: BLE001 - gone or expired meanwhile: nothing more to send
            continue
    return states


async def listen_tasks(call: Call, requested: Mapping[str, Any]) -> tuple[dict[str, Any], Any]:
    """The ``taskIds`` part of a listen request: ``({"taskIds": [...agreed...]}, relay)``.

    :raises JsonRpcError: -32021 (HTTP 400) when the request did not declare the extension;
        -32602 when ``taskIds`` is not a list of strings.
    """
    task_ids = requested.get("taskIds")
    if task_ids is None:
        return {}, None
    if client_extension(call.client_capabilities, EXTENSION) is None:
        raise JsonRpcError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            "Missing required client capability",
            data={"requiredCapabilities": {"extensions": {EXTENSION: {}}}},
            http_status=400,
        )
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: notifications.taskIds must be strings", http_status=400)
    principal = call.principal
    owned = await sync_to_async(released(_owned), thread_sensitive=False)(
        list(dict.fromkeys(task_ids))[:MAX_TASK_IDS], principal
    )
    if not owned:
        return {"taskIds": []}, None

    async def relay(sink: Sink, stamp: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        bells = [_Doorbell(task_topic(task_id), loop, event) for task_id in owned]
        for bell in bells:
            hub.add_waiter(bell)
        sent: dict[str, dict[str, Any]] = {}
        pending = set(owned)
        read = sync_to_async(released(_states), thread_sensitive=False)
        try:
            while pending:
                event.clear()
                for task_id, state in (await read(sorted(pending), principal)).items():
                    if sent.get(task_id) != state:
                        sent[task_id] = state
                        await sink(
                            {"jsonrpc": "2.0", "method": "notifications/tasks", "params": {**state, "_meta": stamp}}
                        )
                    if state["status"] in McpTask.TERMINAL:
                        pending.discard(task_id)
                if not pending:
                    return
                try:
                    await asyncio.wait_for(event.wait(), float(mcp_oauth_settings.WAKEUP_SAFETY_POLL_SECONDS))
                except TimeoutError:
                    pass
        finally:
            for bell in bells:
                hub.remove_waiter(bell)

    return {"taskIds": owned}, relay
