"""Push wake-ups for waiting streams: the database is the record, this is only the doorbell.

A stream that waits for something another worker writes (a session's GET stream waiting for
outbox rows, a tool waiting for the client's answer that was POSTed to another worker)
subscribes to a *topic* and sleeps until someone publishes it; then it reads the database as
before. Nothing is carried in the wake-up, so a lost one loses no data: a slow safety poll
(one query per process, not per stream) finds rows whose wake-up went missing.

Topics: :func:`session_topic` (new outbox row, or the session ended) and
:func:`answer_topic` (a client answer was stored for a session).

Backends, chosen by ``MCP_OAUTH["WAKEUP_URL"]``:

============================  ==========================================================
``None`` (embedded default)   in-process only; with several processes, waiters fall back
                              to polling every ``SSE_POLL_INTERVAL_SECONDS``
``"redis://host:port/db"``    Redis pub/sub: one subscriber connection per process
                              (pattern ``<prefix>*``), publishes from any process
``"postgres"``                PostgreSQL ``LISTEN/NOTIFY`` on the default database: one
                              listening connection per process (outside the pool);
                              ``NOTIFY`` inside a transaction is delivered on commit
============================  ==========================================================

An idle subscriber costs one :class:`asyncio.Event` and a set entry: no thread, no database
connection, no query. When the subscriber connection reconnects, every local waiter is woken
once (it may have missed something while disconnected).

Publishing is synchronous and safe from any thread or process (a view, a Celery task, a
signal receiver); :func:`publish_on_commit` defers it until the current transaction commits.
Outbox rows publish by themselves (``post_save`` of ``McpSessionEvent``), and so does the end
of a session (``mcp_session_ended``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any, Protocol

from asgiref.sync import sync_to_async
from django.apps import apps
from django.db import close_old_connections, connection, transaction
from django.db.models.signals import post_save
from django.utils import timezone

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.signals import mcp_session_ended

# Optional: the Redis and PostgreSQL wake-up channels need their client library only when used.
try:
    import redis
    import redis.asyncio as aioredis
except ImportError:  # pragma: no cover - WAKEUP_URL redis://... then fails when listening
    redis = aioredis = None  # type: ignore[assignment]
try:
    import psycopg
except ImportError:  # pragma: no cover - WAKEUP_URL "postgres" then fails when listening
    psycopg = None  # type: ignore[assignment]

# This module imports no model: the ASGI health lane (mcp_oauth.health -> drain -> wakeup) is
# imported by a site's asgi.py before Django's app loading. The outbox model is looked up by name.
OUTBOX_MODEL = "mcp_oauth.McpSessionEvent"

__all__ = [
    "Subscription",
    "Waiter",
    "WakeupHub",
    "answer_topic",
    "hub",
    "publish",
    "publish_on_commit",
    "session_topic",
]

logger = logging.getLogger("mcp_oauth.transport.wakeup")

CHANNEL_PREFIX = "mcp_oauth:wake:"
PG_CHANNEL = "mcp_oauth_wakeup"


def session_topic(session_id: str) -> str:
    """Topic of a session's outbox (and of its end)."""
    return f"session:{session_id}"


def answer_topic(session_id: str) -> str:
    """Topic of client answers stored for a session (answers that reached another worker)."""
    return f"answer:{session_id}"


class Waiter(Protocol):
    """What the hub wakes: anything with a ``topic`` and a ``_set_threadsafe()`` that may be
    called from any thread."""

    topic: str

    def _set_threadsafe(self) -> None: ...


class Subscription:
    """One waiter's interest in one topic. A wake-up that arrives while nobody waits is kept
    (the next :meth:`wait` returns at once), so subscribe *before* reading the database."""

    __slots__ = ("_event", "_hub", "_loop", "topic")

    def __init__(self, hub: WakeupHub, topic: str, loop: asyncio.AbstractEventLoop) -> None:
        self._hub = hub
        self.topic = topic
        self._loop = loop
        self._event = asyncio.Event()

    def _set_threadsafe(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._event.set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    async def wait(self, timeout: float | None) -> bool:
        """Sleep until woken or ``timeout`` seconds passed. :returns: True when woken."""
        if not self._event.is_set():
            try:
                await asyncio.wait_for(self._event.wait(), timeout)
            except TimeoutError:
                return False
        self._event.clear()
        return True

    def close(self) -> None:
        self._hub._unsubscribe(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class WakeupHub:
    """The process's subscriptions and its connection to the wake-up channel."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: dict[str, set[Waiter]] = defaultdict(set)
        self._tasks: dict[asyncio.AbstractEventLoop, list[asyncio.Task]] = {}
        self._redis: Any = None
        self._redis_url: str | None = None
        self.reconnects = 0

    # --- configuration ------------------------------------------------------------------

    @property
    def url(self) -> str | None:
        return mcp_oauth_settings.WAKEUP_URL or None

    @property
    def shared(self) -> bool:
        """True when wake-ups reach every process (Redis or PostgreSQL): waiters need not poll."""
        url = self.url
        if not url:
            return False
        return url.startswith(("redis://", "rediss://", "unix://")) or url == "postgres"

    # --- subscribing --------------------------------------------------------------------

    def subscribe(self, topic: str) -> Subscription:
        """A :class:`Subscription` to ``topic`` for the running event loop (starts the listener)."""
        subscription = Subscription(self, topic, asyncio.get_running_loop())
        self.add_waiter(subscription)
        return subscription

    def add_waiter(self, waiter: Waiter) -> None:
        """Wake ``waiter`` (its ``_set_threadsafe()``) on every wake-up of ``waiter.topic`` until
        :meth:`remove_waiter`; starts the running event loop's listener. A :class:`Subscription`
        is one kind of waiter; a GET stream's state object (:mod:`.stream_lane`) is another."""
        with self._lock:
            self._subscriptions[waiter.topic].add(waiter)
        if self.shared:
            self._ensure_listener(asyncio.get_running_loop())

    def remove_waiter(self, waiter: Waiter) -> None:
        """Forget ``waiter`` (no error when it is not registered)."""
        with self._lock:
            waiting = self._subscriptions.get(waiter.topic)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._subscriptions[waiter.topic]

    _unsubscribe = remove_waiter

    def waiting_topics(self) -> list[str]:
        with self._lock:
            return list(self._subscriptions)

    def wake_local(self, topic: str) -> int:
        """Wake this process's subscribers of ``topic``. :returns: how many."""
        with self._lock:
            waiting = list(self._subscriptions.get(topic, ()))
        for subscription in waiting:
            subscription._set_threadsafe()
        return len(waiting)

    def wake_all_local(self) -> None:
        with self._lock:
            waiting = [sub for subs in self._subscriptions.values() for sub in subs]
        for subscription in waiting:
            subscription._set_threadsafe()

    # --- publishing ---------------------------------------------------------------------

    def publish(self, topic: str) -> None:
        """Wake every subscriber of ``topic`` in every process (best effort: errors are logged)."""
        self.wake_local(topic)
        url = self.url
        if url is None or not self.shared:
            return
        try:
            if url == "postgres":
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_notify(%s, %s)", [PG_CHANNEL, topic])
            else:
                self._redis_client(url).publish(CHANNEL_PREFIX + topic, b"")
        except Exception as exc:  # noqa: BLE001 - a lost wake-up is recovered by the safety poll
            logger.warning("wake-up for %s not published: %s", topic, exc)

    def _redis_client(self, url: str) -> Any:
        if self._redis is None or self._redis_url != url:
            self._redis = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
            self._redis_url = url
        return self._redis

    # --- listening (one task per event loop) --------------------------------------------

    def _ensure_listener(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            tasks = self._tasks.get(loop)
            if tasks and not any(task.done() for task in tasks):
                return
            for stale_loop in [known for known in self._tasks if known.is_closed()]:
                del self._tasks[stale_loop]
            listen = self._listen_postgres if self.url == "postgres" else self._listen_redis
            self._tasks[loop] = [
                loop.create_task(listen(), name="mcp-oauth-wakeup-listener"),
                loop.create_task(self._safety_poll(), name="mcp-oauth-wakeup-safety-poll"),
            ]

    async def _listen_redis(self) -> None:
        if aioredis is None:
            raise RuntimeError("MCP_OAUTH['WAKEUP_URL'] names Redis: install the redis package")
        backoff = 0.1
        while True:
            url = self.url
            if url is None:  # WAKEUP_URL unset since this listener started: the task ends with the error
                raise RuntimeError("MCP_OAUTH['WAKEUP_URL'] is not set: no wake-up channel to listen to")
            client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.psubscribe(CHANNEL_PREFIX + "*")
                    self.reconnects += 1
                    logger.info("wake-up channel (Redis) subscribed (%d)", self.reconnects)
                    if self.reconnects > 1:
                        self.wake_all_local()  # anything published while we were away
                    # (the first time, the safety poll covers the instant before subscribing)
                    backoff = 0.1
                    async for message in pubsub.listen():
                        if message.get("type") != "pmessage":
                            continue
                        channel = message["channel"]
                        if isinstance(channel, bytes):
                            channel = channel.decode()
                        self.wake_local(channel[len(CHANNEL_PREFIX) :])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - Redis away: retry, waiters keep their safety poll
                logger.warning("wake-up channel (Redis) lost: %s; reconnecting", exc)
            finally:
                try:
                    await client.aclose()
                except Exception:  # noqa: BLE001
                    pass
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _listen_postgres(self) -> None:
        if psycopg is None:
            raise RuntimeError("MCP_OAUTH['WAKEUP_URL'] is 'postgres': install psycopg (3)")
        backoff = 0.1
        while True:
            try:
                params = connection.get_connection_params()
                params.pop("cursor_factory", None)
                params.pop("context", None)
                params.pop("prepare_threshold", None)
                aconn = await psycopg.AsyncConnection.connect(autocommit=True, **params)
                async with aconn:
                    await aconn.execute(f"LISTEN {PG_CHANNEL}")
                    self.reconnects += 1
                    if self.reconnects > 1:
                        self.wake_all_local()
                    backoff = 0.1
                    async for notify in aconn.notifies():
                        self.wake_local(notify.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                logger.warning("wake-up channel (PostgreSQL LISTEN) lost: %s; reconnecting", exc)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)

    async def _safety_poll(self) -> None:
        """Every ``WAKEUP_SAFETY_POLL_SECONDS``: one query for outbox rows newer than the
        previous polls, waking the local streams of their sessions (recovers lost wake-ups)."""
        marks: list[int | None] = [None, None]
        while True:
            interval = float(mcp_oauth_settings.WAKEUP_SAFETY_POLL_SECONDS)
            await asyncio.sleep(interval)
            if not any(topic.startswith("session:") for topic in self.waiting_topics()):
                continue
            since = timezone.now() - timedelta(seconds=2 * interval + 5)
            low = marks[0] if marks[0] is not None else marks[1]
            try:
                sessions, newest = await sync_to_async(_recent_outbox_sessions, thread_sensitive=False)(low, since)
            except Exception as exc:  # noqa: BLE001 - database busy: try again next round
                logger.warning("wake-up safety poll failed: %s", exc)
                continue
            marks = [marks[1], newest]
            if sessions:
                logger.info("wake-up safety poll: %d session(s) with recent outbox rows", len(sessions))
            for session_id in sessions:
                self.wake_local(session_topic(session_id))


def _recent_outbox_sessions(after_id: int | None, since: datetime) -> tuple[set[str], int]:
    """Sessions with outbox rows of id > ``after_id`` created since ``since``, and the newest id
    seen. The id bound keeps the query on the primary-key index (``None``: the last 10,000 ids).
    Runs on a pool thread and gives its connection back at once."""
    McpSessionEvent = apps.get_model(OUTBOX_MODEL)

    try:
        if after_id is None:
            newest = McpSessionEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0
            after_id = max(0, newest - 10000)
        rows = list(
            McpSessionEvent.objects.filter(id__gt=after_id, created_at__gte=since).values_list("id", "session_id")[
                :10000
            ]
        )
        return {session for _, session in rows}, max((row_id for row_id, _ in rows), default=after_id)
    finally:
        close_old_connections()
        connection.close()


#: The process-wide hub.
hub = WakeupHub()


def publish(topic: str) -> None:
    """:meth:`WakeupHub.publish` on the process-wide hub."""
    hub.publish(topic)


def publish_on_commit(topic: str) -> None:
    """Publish ``topic`` once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: hub.publish(topic))


async def wait_for_answer(future: asyncio.Future, session_id: str, timeout: float) -> bool:
    """Wait until ``future`` is done, or an answer for ``session_id`` was stored by another worker,
    or ``timeout`` passed. :returns: True when ``future`` is done."""
    with hub.subscribe(answer_topic(session_id)) as subscription:
        waiter = asyncio.ensure_future(subscription.wait(timeout))
        try:
            await asyncio.wait({future, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
    return future.done()


def answer_poll_interval(poll_interval: float) -> float:
    """How often a tool waiting for an answer re-reads the database: ``poll_interval`` without a
    shared channel, else the safety interval (the wake-up does the rest)."""
    if hub.shared:
        return max(poll_interval, float(mcp_oauth_settings.WAKEUP_SAFETY_POLL_SECONDS))
    return poll_interval


# --- receivers: rows and events that publish by themselves --------------------------------


def _outbox_row_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if created:
        publish_on_commit(session_topic(instance.session_id))


def _session_ended(sender: Any, session: Any, **kwargs: Any) -> None:
    publish(session_topic(session.pk))


def connect_receivers() -> None:
    """Connect the publishing receivers (called once from ``MCPOAuthConfig.ready``)."""
    post_save.connect(_outbox_row_saved, sender=OUTBOX_MODEL, dispatch_uid="mcp_oauth.wakeup.outbox")
    mcp_session_ended.connect(_session_ended, dispatch_uid="mcp_oauth.wakeup.session_ended")


def released(function: Any) -> Any:
    """``function`` that gives its thread's database connection back (to the pool) when done,
    unless inside a transaction: an idle stream between two reads holds no connection."""

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        finally:
            if not connection.in_atomic_block:
                connection.close()

    return run
