"""Resource subscriptions and list-changed notifications, delivered through session outboxes.

2025-11-25 sessions (MCP "Resources" / "Subscriptions", "List Changed Notification"):

* :func:`subscribe` / :func:`unsubscribe` keep one
  :class:`~mcp_oauth.models.ResourceSubscription` row per (session, URI).
* :func:`notify_resource_updated` puts ``notifications/resources/updated`` into the
  outbox of every live session subscribed to the URI **whose user may still read
  it** (the ``visible`` check, e.g. a :class:`~.models.ModelResource` queryset for that
  user): a subscription never outlives the right to read.
* :func:`notify_list_changed` puts ``notifications/resources/list_changed`` (or
  ``prompts``) into the outbox of live sessions, of the given users only when
  ``users`` is given.

The session's GET stream delivers the outbox (and replays it after
``Last-Event-ID``); the same notification is also sent as
:data:`registry_notification` (``message``, ``user_ids`` (None: everyone),
``uri``), so a stateless 2026-07-28 ``subscriptions/listen`` stream can publish it.

:func:`connect_model_resource` wires a ModelResource's ``post_save`` /
``pre_delete`` / ``post_delete`` to these, after the transaction commits, so a
change made in the admin reaches subscribed clients.

All functions are synchronous (ORM).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import Signal

from ..models import McpSession, ResourceSubscription
from ..settings import mcp_oauth_settings
from ..transport.jsonrpc import INVALID_PARAMS, McpError
from ..transport.sessions import enqueue_session_message
from .context import RequestContext

if TYPE_CHECKING:
    from .models import ModelResource

__all__ = [
    "connect_model_resource",
    "notify_list_changed",
    "notify_resource_updated",
    "registry_notification",
    "subscribe",
    "unsubscribe",
]

logger = logging.getLogger("mcp_oauth.registry")

#: Sent for every notification queued here: ``message`` (the JSON-RPC notification),
#: ``user_ids`` (set of user pks it may reach, None: every user), ``uri`` (for
#: ``updated``; None otherwise). Stateless-era subscription streams listen to it.
registry_notification = Signal()

_LIST_CHANGED = {
    "resources": "notifications/resources/list_changed",
    "prompts": "notifications/prompts/list_changed",
}


def subscribe(session: McpSession, uri: str) -> None:
    """Subscribe ``session`` to ``uri`` (idempotent).

    :raises McpError: -32602 when the session already holds
        ``MAX_SUBSCRIPTIONS_PER_SESSION`` other subscriptions.
    """
    limit = int(mcp_oauth_settings.MAX_SUBSCRIPTIONS_PER_SESSION)
    with transaction.atomic():
        if ResourceSubscription.objects.filter(session=session, uri=uri).exists():
            return
        if ResourceSubscription.objects.filter(session=session).count() >= limit:
            raise McpError(INVALID_PARAMS, f"Too many subscriptions: a session may hold {limit}", {"limit": limit})
        ResourceSubscription.objects.get_or_create(session=session, uri=uri)


def unsubscribe(session: McpSession, uri: str) -> bool:
    """Remove the subscription of ``session`` to ``uri``. :returns: whether one existed."""
    deleted, _ = ResourceSubscription.objects.filter(session=session, uri=uri).delete()
    return bool(deleted)


def _enqueue(session_id: str, message: dict[str, Any]) -> bool:
    try:
        enqueue_session_message(session_id, message)
    except McpSession.DoesNotExist:
        return False  # the session ended meanwhile
    return True


def notify_resource_updated(uri: str, *, visible: Callable[[McpSession], bool] | None = None) -> list[str]:
    """``notifications/resources/updated`` for ``uri`` to its live subscribers that pass ``visible``.

    :param visible: ``fn(session) -> bool``: whether the session's user may read ``uri``
        now; None: every subscriber.
    :returns: the ids of the sessions notified.
    """
    message = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
    sessions = McpSession.objects.live().filter(resource_subscriptions__uri=uri).select_related("user", "resource")
    sent = []
    user_ids: set[Any] = set()
    for session in sessions:
        if visible is not None and not visible(session):
            continue
        if _enqueue(session.pk, message):
            sent.append(session.pk)
            user_ids.add(session.user_id)
    registry_notification.send(sender=McpSession, message=message, user_ids=user_ids, uri=uri)
    return sent


def notify_list_changed(kind: str, *, users: Iterable[Any] | None = None) -> list[str]:
    """``notifications/<kind>/list_changed`` to every live session (of ``users`` when given).

    :param kind: ``"resources"`` or ``"prompts"``.
    :param users: user objects or pks; None: every session.
    :returns: the ids of the sessions notified.
    :raises ValueError: unknown ``kind``.
    """
    method = _LIST_CHANGED[kind] if kind in _LIST_CHANGED else None
    if method is None:
        raise ValueError(f"unknown list kind {kind!r}; use one of {', '.join(_LIST_CHANGED)}")
    message = {"jsonrpc": "2.0", "method": method}
    sessions = McpSession.objects.live()
    user_ids = None
    if users is not None:
        user_ids = {getattr(user, "pk", user) for user in users}
        sessions = sessions.filter(user_id__in=user_ids)
    sent = [pk for pk in sessions.values_list("pk", flat=True) if _enqueue(pk, message)]
    registry_notification.send(sender=McpSession, message=message, user_ids=user_ids, uri=None)
    return sent


# --- ModelResource signals ---------------------------------------------------------------


def _viewers(model_resource: ModelResource, obj: Any) -> tuple[set[str], set[Any]]:
    """Sessions subscribed to ``obj``'s URI whose user sees it, and the users (among live
    sessions) who see it."""
    uri = model_resource.uri_for(obj)
    cache: dict[Any, bool] = {}

    def sees(session: McpSession) -> bool:
        if session.user_id not in cache:
            try:
                cache[session.user_id] = model_resource.visible_to(RequestContext.for_session(session), obj)
            except Exception:  # noqa: BLE001 - a broken queryset must not break the save
                logger.exception("%r: visibility check failed", model_resource)
                cache[session.user_id] = False
        return cache[session.user_id]

    subscribed = {
        session.pk
        for session in McpSession.objects.live().filter(resource_subscriptions__uri=uri).select_related("user", "resource")
        if sees(session)
    }
    users = {
        session.user_id
        for session in McpSession.objects.live().select_related("user", "resource").distinct()
        if session.user_id is not None and sees(session)
    }
    return subscribed, users


def _deliver(uri: str, session_ids: set[str], user_ids: set[Any]) -> None:
    updated = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
    for session_id in sorted(session_ids):
        _enqueue(session_id, updated)
    registry_notification.send(sender=McpSession, message=updated, user_ids=set(user_ids), uri=uri)
    if user_ids:
        notify_list_changed("resources", users=user_ids)


def connect_model_resource(model_resource: ModelResource) -> None:
    """Send notifications for ``model_resource``'s rows on save and delete (after commit)."""
    model = model_resource.model
    uid = f"mcp_oauth.registry:{model._meta.label}:{model_resource.template}"

    def saved(sender: Any, instance: Any, raw: bool = False, using: str | None = None, **kwargs: Any) -> None:
        if raw:
            return  # loaddata

        def run() -> None:
            subscribed, users = _viewers(model_resource, instance)
            _deliver(model_resource.uri_for(instance), subscribed, users)

        transaction.on_commit(run, using=using)

    def deleting(sender: Any, instance: Any, using: str | None = None, **kwargs: Any) -> None:
        subscribed, users = _viewers(model_resource, instance)
        pending = getattr(instance, "_mcp_oauth_pending", {})
        pending[uid] = (model_resource.uri_for(instance), subscribed, users)
        instance._mcp_oauth_pending = pending

    def deleted(sender: Any, instance: Any, using: str | None = None, **kwargs: Any) -> None:
        found = getattr(instance, "_mcp_oauth_pending", {}).pop(uid, None)
        if found is not None:
            transaction.on_commit(lambda: _deliver(*found), using=using)

    post_save.connect(saved, sender=model, weak=False, dispatch_uid=uid + ":save")
    pre_delete.connect(deleting, sender=model, weak=False, dispatch_uid=uid + ":pre_delete")
    post_delete.connect(deleted, sender=model, weak=False, dispatch_uid=uid + ":delete")
