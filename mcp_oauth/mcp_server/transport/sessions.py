"""MCP sessions kept in the database, and their server-to-client outbox.

MCP 2025-11-25 "Transports" / "Session Management": the server assigns a session
id in the ``Mcp-Session-Id`` header of the ``initialize`` response; the client
sends it on every later request; a request without it gets HTTP 400, an unknown
or terminated id HTTP 404, and DELETE ends the session. Here a session is also
bound to the user, the OAuth client and the resource of the token that opened
it: another principal presenting the id gets the same 404 as for an unknown id.

Every state lives in the database, so any worker can serve any request of any
session. Server-to-client messages that are not tied to one POST (completion
notifications, list changes, messages sent from Celery) go into the session's
outbox with :func:`enqueue_session_message`; the session's GET stream delivers
them in ``id`` order with SSE event id ``"<id>"`` and resumes after
``Last-Event-ID`` ("Resumability and Redelivery").

All functions here but :func:`afind_session` are synchronous (ORM): call them with
``sync_to_async`` from async code.

**Session cache.** A live session found by :func:`find_session` is kept in the shared cache
(``MCP_OAUTH["TOKEN_CACHE"]``, key ``mcp_oauth:session:<id>``) until its next ``last_seen_at``
touch is due, so :func:`afind_session` answers the requests in between from one cache read on
the event loop (no thread hop, no query). Ending a session (:func:`end_session`, DELETE),
:func:`set_log_level`, and saving or deleting the row (admin, cleanup) replace the entry by a
tombstone at once and again after commit, so every worker stops serving it immediately;
entries are written with ``cache.add``, which never replaces a tombstone.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from mcp_oauth.models import McpSession, McpSessionEvent
from mcp_oauth.resource_server.authentication import BearerPrincipal
from mcp_oauth.resource_server.cache import TOMBSTONE, aget_many, cache_entry, tombstone
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "SESSION_ID_RE",
    "afind_session",
    "forget_session",
    "session_cache_key",
    "create_session",
    "end_session",
    "enqueue_session_message",
    "find_session",
    "is_session_live",
    "read_outbox",
    "set_log_level",
    "touch_session",
]

#: What a session id we issue looks like (``secrets.token_urlsafe(32)``); anything else is unknown.
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

#: ``last_seen_at`` is written at most this often per session (seconds), to keep requests cheap.
TOUCH_INTERVAL_SECONDS = 60


def _touch_interval() -> timedelta:
    timeout = float(mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS)
    return timedelta(seconds=max(0.0, min(TOUCH_INTERVAL_SECONDS, timeout / 10)))


def create_session(
    principal: BearerPrincipal,
    *,
    protocol_version: str,
    client_capabilities: dict[str, Any],
    client_info: dict[str, Any],
) -> McpSession:
    """A new session bound to ``principal``'s user, client, resource and organization."""
    return McpSession.objects.create(
        user=principal.user,
        application=principal.application,
        resource=principal.resource,
        organization=principal.organization,
        protocol_version=protocol_version,
        client_capabilities=client_capabilities,
        client_info=client_info,
    )


def find_session(session_id: str, principal: BearerPrincipal, *, touch: bool = True) -> McpSession | None:
    """The live session ``session_id`` opened by the same user and client for the same resource
    and organization.

    :returns: None for a malformed, unknown, ended or idle-expired id, or one that
        belongs to another user, client or resource (the caller answers 404 alike).
    :param touch: refresh ``last_seen_at`` (at most once per :data:`TOUCH_INTERVAL_SECONDS`).
    """
    if not isinstance(session_id, str) or not SESSION_ID_RE.match(session_id):
        return None
    session = (
        McpSession.objects.live()
        .filter(
            pk=session_id,
            user=principal.user,
            application=principal.application,
            resource=principal.resource,
            organization=principal.organization,  # another organization's session: not found, alike
        )
        .first()
    )
    if session is not None and touch:
        now = timezone.now()
        if now - session.last_seen_at >= _touch_interval():
            McpSession.objects.filter(pk=session.pk).update(last_seen_at=now)
            session.last_seen_at = now
        _remember(session)
    return session


SESSION_PREFIX = "mcp_oauth:session:"

#: The fields a cached session carries (everything a request reads from it).
_CACHED_FIELDS = (
    "user_id",
    "application_id",
    "resource_id",
    "organization_id",
    "protocol_version",
    "client_capabilities",
    "client_info",
    "log_level",
    "created_at",
    "last_seen_at",
)


def _remember(session: McpSession) -> None:
    """Cache a live session until its next touch is due."""
    due = session.last_seen_at + _touch_interval()
    entry = {name: getattr(session, name) for name in _CACHED_FIELDS}
    cache_entry(SESSION_PREFIX + session.pk, entry, (due - timezone.now()).total_seconds())


def forget_session(session_id: str) -> None:
    """Invalidate the cached session ``session_id`` on every worker (now and after commit)."""
    tombstone([SESSION_PREFIX + session_id])


def _from_entry(session_id: str, entry: Any, principal: BearerPrincipal) -> McpSession | None:
    if not isinstance(entry, dict) or entry == TOMBSTONE:
        return None
    owner = (
        principal.user.pk if principal.user is not None else None,
        principal.application.pk if principal.application is not None else None,
        principal.resource.pk,
        principal.organization.pk if principal.organization is not None else None,
    )
    if (
        entry.get("user_id"),
        entry.get("application_id"),
        entry.get("resource_id"),
        entry.get("organization_id"),
    ) != owner:
        return None  # another principal: the database path gives the 404
    now = timezone.now()
    last_seen = entry["last_seen_at"]
    idle = timedelta(seconds=float(mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS))
    if now - last_seen >= _touch_interval() or now - last_seen > idle:
        return None  # a touch is due (or it idled out): the database path decides
    session = McpSession(id=session_id, ended_at=None, **entry)
    session._state.adding = False
    session._state.db = McpSession.objects.db
    return session


def session_cache_key(session_id: str) -> str:
    """The session's key in the token cache."""
    return SESSION_PREFIX + session_id


async def afind_session(
    session_id: str, principal: BearerPrincipal, prefetched: dict[str, Any] | None = None, *, cached: bool = True
) -> McpSession | None:
    """:func:`find_session` from async code: from the session cache when there (no thread hop),
    else :func:`find_session` in a thread.

    :param prefetched: cache entries already read in this request (``{key: value}``), e.g. by
        :func:`~mcp_oauth.resource_server.authentication.authenticate_bearer_cached`.
    :param cached: False: straight to :func:`find_session` (a GET stream's one lookup).
    """
    if cached and isinstance(session_id, str) and SESSION_ID_RE.match(session_id):
        key = SESSION_PREFIX + session_id
        values = prefetched if prefetched and key in prefetched else await aget_many([key])
        if values:
            session = _from_entry(session_id, values.get(SESSION_PREFIX + session_id), principal)
            if session is not None:
                return session
    return await sync_to_async(find_session)(session_id, principal)


def _session_changed(sender: Any, instance: McpSession, created: bool = False, **kwargs: Any) -> None:
    if not created:
        forget_session(instance.pk)


def connect_receivers() -> None:
    """Invalidate cached sessions when a row is saved or deleted (called from the app's ``ready``)."""
    post_save.connect(_session_changed, sender=McpSession, dispatch_uid="mcp_oauth.sessions.cache.save")
    post_delete.connect(_session_changed, sender=McpSession, dispatch_uid="mcp_oauth.sessions.cache.delete")


def touch_session(session_id: str) -> bool:
    """Mark the session as used now (an open GET stream keeps its session alive).

    :returns: False when the session has ended or is gone (its streams end: an end whose
        wake-up was lost is found here, without a query of its own).
    """
    return bool(McpSession.objects.filter(pk=session_id, ended_at__isnull=True).update(last_seen_at=timezone.now()))


def end_session(session: McpSession) -> bool:
    """Terminate ``session`` (``ended_at`` = now). :returns: False when it had already ended."""
    now = timezone.now()
    updated = McpSession.objects.filter(pk=session.pk, ended_at__isnull=True).update(ended_at=now)
    forget_session(session.pk)
    session.ended_at = now
    return bool(updated)


def set_log_level(session: McpSession, level: str) -> None:
    """Store the minimum log level of ``logging/setLevel``."""
    McpSession.objects.filter(pk=session.pk).update(log_level=level)
    forget_session(session.pk)
    session.log_level = level


def is_session_live(session_id: str) -> bool:
    """Whether the session exists, has not ended and has not idled out."""
    return McpSession.objects.live().filter(pk=session_id).exists()


def enqueue_session_message(session_id: str | McpSession, message: dict[str, Any]) -> McpSessionEvent:
    """Put a server-to-client JSON-RPC message in the session's outbox; return its row.

    Safe to call from any process (a Celery worker, another app, a management
    command): the outbox is a table, and every GET stream of the session reads
    it. Inside a transaction, the message becomes visible when it commits.

    :param session_id: the session's id, or its row as the caller just loaded it (then its
        liveness is checked on that row, without a query: one INSERT in all).

    :param message: a JSON-RPC notification (``{"jsonrpc": "2.0", "method": …,
        "params"?: {…}}``) or request (with an ``id``); ``"jsonrpc"`` is added when
        missing. Responses are refused: the GET stream carries no responses
        (MCP 2025-11-25 "Listening for Messages from the Server").
    :raises ValueError: ``message`` is not a JSON-RPC notification or request.
    :raises McpSession.DoesNotExist: no live session has that id.
    """
    if not isinstance(message, dict) or not isinstance(message.get("method"), str) or not message["method"]:
        raise ValueError("a session message must be a JSON-RPC notification or request with a method")
    if "result" in message or "error" in message:
        raise ValueError("responses cannot be sent on the session stream")
    if "params" in message and not isinstance(message["params"], dict):
        raise ValueError('"params" must be an object')
    message = {"jsonrpc": "2.0", **message}
    if message["jsonrpc"] != "2.0":
        raise ValueError('"jsonrpc" must be "2.0"')
    if isinstance(session_id, McpSession):
        if not session_id.is_live:
            raise McpSession.DoesNotExist(f"no live MCP session {session_id.pk!r}")
        return McpSessionEvent.objects.create(session=session_id, message=message)
    with transaction.atomic():
        session = McpSession.objects.live().filter(pk=session_id).only("pk").first()
        if session is None:
            raise McpSession.DoesNotExist(f"no live MCP session {session_id!r}")
        return McpSessionEvent.objects.create(session=session, message=message)


def read_outbox(session_id: str, after_id: int, limit: int = 100) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """The session's outbox rows with ``id > after_id`` (oldest first, at most ``limit``), and
    whether the session is still live.
    """
    live = is_session_live(session_id)
    if not live:
        return [], False
    rows = list(
        McpSessionEvent.objects.filter(session_id=session_id, id__gt=after_id)
        .order_by("id")
        .values_list("id", "message")[:limit]
    )
    return rows, True
