"""Server events for ``subscriptions/listen`` streams (MCP 2026-07-28 "Subscriptions", SEP-2575).

Publish from anywhere in the process (a view, a signal receiver, a registry), sync or async::

    from mcp_oauth.mcp_server.transport.subscriptions import publish_list_changed, publish_resource_updated

    publish_list_changed("tools")          # "prompts", "resources"
    publish_resource_updated("test://watched-resource")

Every open listen stream whose client opted in to that kind gets the notification
(``notifications/tools/list_changed`` …, tagged with ``_meta["io.modelcontextprotocol/subscriptionId"]``).
Delivery is fire-and-forget and in-process (:class:`InProcessBroker`); a deployment with
several processes installs a broker that fans out between them with :func:`set_broker` (same two
methods: ``publish(event)`` and ``subscribe()``). Legacy sessions receive list changes through
their outbox instead (:func:`mcp_oauth.mcp_server.transport.sessions.enqueue_session_message`).

What a listen stream honours is :data:`supported_filters`; an app that publishes prompt or
resource events adds their filter name (``supported_filters.add("promptsListChanged")``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LIST_CHANGED",
    "Event",
    "InProcessBroker",
    "get_broker",
    "publish_list_changed",
    "publish_resource_updated",
    "reaches",
    "set_broker",
    "supported_filters",
]

logger = logging.getLogger("mcp_oauth.transport")

#: kind -> (``SubscriptionFilter`` field, notification method).
LIST_CHANGED: dict[str, tuple[str, str]] = {
    "tools": ("toolsListChanged", "notifications/tools/list_changed"),
    "prompts": ("promptsListChanged", "notifications/prompts/list_changed"),
    "resources": ("resourcesListChanged", "notifications/resources/list_changed"),
}

#: ``SubscriptionFilter`` fields this server honours (acknowledged and delivered).
supported_filters: set[str] = {"toolsListChanged"}


@dataclass(frozen=True)
class Event:
    """One server event: the filter field it belongs to, the notification method, its params,
    and for ``resourceSubscriptions`` the resource URI."""

    filter: str
    method: str
    params: dict[str, Any] | None = None
    uri: str | None = None
    #: ``fn(principal) -> bool`` (sync, may use the ORM): whether the listener may receive the
    #: event (e.g. its user may read the changed row); None: every listener.
    audience: Callable[[Any], bool] | None = None


def reaches(event: Event, principal: Any) -> bool:
    """``event.audience(principal)``; False when it raises (a failing check never leaks)."""
    if event.audience is None:
        return True
    try:
        return bool(event.audience(principal))
    except Exception:
        logger.exception("audience check of %s failed", event.method)
        return False


class InProcessBroker:
    """Fan-out to the listen streams of this process (thread-safe ``publish``)."""

    def __init__(self, max_backlog: int = 1000) -> None:
        self._lock = threading.Lock()
        self._queues: set[tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = set()
        self.max_backlog = max_backlog

    def publish(self, event: Event) -> int:
        """Hand ``event`` to every subscriber; returns how many there were."""
        with self._lock:
            targets = list(self._queues)
        for loop, queue in targets:
            try:
                loop.call_soon_threadsafe(_offer, queue, event)
            except RuntimeError:  # the loop is closed
                pass
        return len(targets)

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[asyncio.Queue]:
        """An ``asyncio.Queue`` of :class:`Event` for as long as the block runs."""
        entry: tuple[asyncio.AbstractEventLoop, asyncio.Queue] = (
            asyncio.get_running_loop(),
            asyncio.Queue(self.max_backlog),
        )
        with self._lock:
            self._queues.add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                self._queues.discard(entry)


def _offer(queue: asyncio.Queue, event: Event) -> None:
    try:
        queue.put_nowait(event)
    except asyncio.QueueFull:  # a stream that stopped reading loses events, never blocks others
        pass


_broker: Any = InProcessBroker()


def get_broker() -> Any:
    return _broker


def set_broker(broker: Any) -> None:
    """Install another broker (``publish(Event)``, ``subscribe()`` async context manager of a queue)."""
    global _broker
    _broker = broker


def publish_list_changed(kind: str) -> int:
    """``notifications/<kind>/list_changed`` to every listen stream that opted in.

    :param kind: ``"tools"``, ``"prompts"`` or ``"resources"``.
    :raises ValueError: another kind.
    """
    try:
        field_name, method = LIST_CHANGED[kind]
    except KeyError:
        raise ValueError(f"unknown list kind {kind!r}; use one of {', '.join(LIST_CHANGED)}") from None
    return get_broker().publish(Event(field_name, method))


def publish_resource_updated(uri: str) -> int:
    """``notifications/resources/updated`` for ``uri`` to the streams subscribed to it."""
    return get_broker().publish(Event("resourceSubscriptions", "notifications/resources/updated", {"uri": uri}, uri))
