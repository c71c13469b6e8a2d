"""Resource subscriptions and list-changed notifications, delivered through session outboxes.

2025-11-25 sessions (MCP "Resources" / "Subscriptions", "List Changed Notification"):

* :func:`subscribe` / :func:`unsubscribe` keep one
  :class:`~mcp_oauth.models.ResourceSubscription` row per (session, URI).
* :func:`notify_resource_updated` puts ``notifications/resources/updated`` into the
  outbox of every live session subscribed to the URI **whose user may still read
  it** (the ``visible`` check, e.g. a :class:`~.model_resources.ModelResource` queryset for that
  user): a subscription never outlives the right to read.
* :func:`notify_list_changed` puts ``notifications/resources/list_changed`` (or
  ``prompts``) into the outbox of live sessions, of the given users only when
  ``users`` is given.

The session's GET stream delivers the outbox (and replays it after
``Last-Event-ID``). The same notification is also sent as the Django signal
:data:`registry_notification` (``message``, ``user_ids`` (None: everyone), ``uri``).

2026-07-28 (no sessions): the notifications are published after commit to
``subscriptions/listen`` streams (:mod:`mcp_oauth.mcp_server.transport.subscriptions`) with an
``audience`` check run per listener: its user must see the row now (ModelResource
queryset) or be among ``users``. Known limit: a row deleted, or moved away from a user, is
no longer visible to anyone's check, so listen streams get no ``updated`` /
``list_changed`` for it (2025-11-25 sessions do: their subscribers are known beforehand).

:func:`connect_model_resource` wires a ModelResource's ``post_save`` /
``pre_delete`` / ``post_delete`` to these, after the transaction commits, so a
change made in the admin reaches subscribed clients. ``list_changed`` goes to the users who
see the row after the change *and* (for an update) to those who saw it before, so a row that
moves from one owner to another leaves the first owner's list and enters the second's;
``updated`` goes only to subscribers who may read the row after the change.

All functions are synchronous (ORM).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol, cast

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.dispatch import Signal

from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.resources import active_resource_registry
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError
from mcp_oauth.mcp_server.transport.sessions import enqueue_session_message
from mcp_oauth.mcp_server.transport.subscriptions import LIST_CHANGED, Event, get_broker
from mcp_oauth.models import McpSession, ResourceSubscription
from mcp_oauth.settings import mcp_oauth_settings

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

_LIST_CHANGED = {kind: LIST_CHANGED[kind][1] for kind in ("resources", "prompts")}


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


def notify_resource_updated(
    uri: str,
    *,
    visible: Callable[[McpSession], bool] | None = None,
    audience: Callable[[Any], bool] | None = None,
) -> list[str]:
    """``notifications/resources/updated`` for ``uri`` to its live subscribers that pass ``visible``,
    and to the 2026-07-28 listen streams subscribed to ``uri`` whose principal passes ``audience``.

    :param visible: ``fn(session) -> bool``: whether the session's user may read ``uri``
        now; None: every subscriber.
    :param audience: ``fn(principal) -> bool`` for listen streams; None: every stream subscribed to ``uri``.
    :returns: the ids of the sessions notified.
    """
    _publish(Event("resourceSubscriptions", "notifications/resources/updated", {"uri": uri}, uri, audience))
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
    field_name = LIST_CHANGED[kind][0]
    _publish(Event(field_name, method, audience=None if user_ids is None else _user_in(frozenset(user_ids))))
    sent = [pk for pk in sessions.values_list("pk", flat=True) if _enqueue(pk, message)]
    registry_notification.send(sender=McpSession, message=message, user_ids=user_ids, uri=None)
    return sent


def _user_in(user_ids: frozenset) -> Callable[[Any], bool]:
    def audience(principal: Any) -> bool:
        return getattr(principal, "user", None) is not None and principal.user.pk in user_ids

    return audience


def _publish(event: Event) -> None:
    """Hand ``event`` to the 2026-07-28 listen streams (after commit, like the outbox rows)."""
    transaction.on_commit(lambda: get_broker().publish(event))


def _principal_context(principal: Any) -> RequestContext:
    return RequestContext.for_principal(principal)


# --- ModelResource signals ---------------------------------------------------------------

_connected_models: set[type] = set()


class NotifyingTemplate(Protocol):
    """What this module needs of a :class:`~.model_resources.ModelResource` (which imports this
    module, not the other way round): a template over ``model`` that may ``notify``."""

    model: Any
    notify: bool
    lister: Any

    def uri_for(self, obj: Any) -> str: ...

    def visible_to(self, ctx: RequestContext, obj: Any) -> bool: ...


def _active_model_resources(model: type) -> list[NotifyingTemplate]:
    """The notifying ModelResources over ``model`` in the registry the endpoint serves now."""
    return [
        cast(NotifyingTemplate, template)
        for template in active_resource_registry().templates()
        if getattr(template, "model", None) is model and getattr(template, "notify", False)
    ]


def _changes(model: type, obj: Any) -> list[tuple[str, set[str], set[Any]]]:
    """For each ModelResource over ``model``: ``obj``'s URI, the subscribed sessions whose user sees
    ``obj`` through it, and (for listed ones) the users among live sessions who see it."""
    found = []
    for model_resource in _active_model_resources(model):
        cache: dict[Any, bool] = {}

        def sees(session: McpSession, model_resource: NotifyingTemplate = model_resource, cache: dict = cache) -> bool:
            if session.user_id not in cache:
                try:
                    cache[session.user_id] = model_resource.visible_to(RequestContext.for_session(session), obj)
                except Exception:  # a broken queryset must not break the save
                    logger.exception("%r: visibility check failed", model_resource)
                    cache[session.user_id] = False
            return cache[session.user_id]

        uri = model_resource.uri_for(obj)
        live = McpSession.objects.live().select_related("user", "resource")
        subscribed = {session.pk for session in live.filter(resource_subscriptions__uri=uri) if sees(session)}
        users: set[Any] = set()
        if model_resource.lister is not None:
            users = {session.user_id for session in live if session.user_id is not None and sees(session)}
        found.append((uri, subscribed, users))
    return found


def _modern_events(model: type, obj: Any) -> list[Event]:
    """2026-07-28 events for a saved ``obj``: ``updated`` for each URI and ``list_changed`` (listed
    ModelResources), each reaching only listeners whose user sees ``obj`` through it now."""
    events = []
    for model_resource in _active_model_resources(model):

        def audience(principal: Any, model_resource: NotifyingTemplate = model_resource) -> bool:
            return model_resource.visible_to(_principal_context(principal), obj)

        uri = model_resource.uri_for(obj)
        events.append(Event("resourceSubscriptions", "notifications/resources/updated", {"uri": uri}, uri, audience))
        if model_resource.lister is not None:
            events.append(Event(LIST_CHANGED["resources"][0], LIST_CHANGED["resources"][1], audience=audience))
    return events


def _deliver(changes: list[tuple[str, set[str], set[Any]]]) -> None:
    list_users: set[Any] = set()
    for uri, session_ids, users in changes:
        updated = {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}}
        for session_id in sorted(session_ids):
            _enqueue(session_id, updated)
        if session_ids:
            reached = set(McpSession.objects.filter(pk__in=session_ids).values_list("user_id", flat=True))
            registry_notification.send(sender=McpSession, message=updated, user_ids=reached, uri=uri)
        list_users |= users
    if list_users:
        message = {"jsonrpc": "2.0", "method": LIST_CHANGED["resources"][1]}
        sessions = McpSession.objects.live().filter(user_id__in=list_users).values_list("pk", flat=True)
        for session_id in sessions:
            _enqueue(session_id, message)


def _saving(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    """Before an update: the users who see the row as it was (they get ``list_changed`` too)."""
    if raw or instance._state.adding or instance.pk is None or not _active_model_resources(sender):
        return
    before = sender._base_manager.filter(pk=instance.pk).first()
    if before is not None:
        instance._mcp_oauth_before = set().union(*(users for _, _, users in _changes(sender, before)))


def _saved(sender: Any, instance: Any, raw: bool = False, using: str | None = None, **kwargs: Any) -> None:
    if raw:
        return  # loaddata
    before = instance.__dict__.pop("_mcp_oauth_before", set())

    def deliver() -> None:
        changes = _changes(sender, instance)
        if before:
            changes.append(("", set(), before))
        _deliver(changes)
        for event in _modern_events(sender, instance):
            get_broker().publish(event)

    transaction.on_commit(deliver, using=using)


def _deleting(sender: Any, instance: Any, **kwargs: Any) -> None:
    instance._mcp_oauth_changes = _changes(sender, instance)  # the row is still there: who sees it


def _deleted(sender: Any, instance: Any, using: str | None = None, **kwargs: Any) -> None:
    changes = instance.__dict__.pop("_mcp_oauth_changes", None)
    if changes:
        transaction.on_commit(lambda: _deliver(changes), using=using)


def connect_model_resource(model_resource: NotifyingTemplate) -> None:
    """Send notifications for the rows of ``model_resource``'s model on save and delete (after commit).

    One set of receivers per model: each change is checked against every notifying
    ModelResource over the model in the registry served at that moment
    (``MCP_OAUTH["RESOURCE_REGISTRY"]``), and ``list_changed`` goes once per session.
    """
    model = model_resource.model
    if model in _connected_models:
        return
    uid = f"mcp_oauth.mcp_server.registry:{model._meta.label}"
    pre_save.connect(_saving, sender=model, weak=False, dispatch_uid=uid + ":pre_save")
    post_save.connect(_saved, sender=model, weak=False, dispatch_uid=uid + ":save")
    pre_delete.connect(_deleting, sender=model, weak=False, dispatch_uid=uid + ":pre_delete")
    post_delete.connect(_deleted, sender=model, weak=False, dispatch_uid=uid + ":delete")
    _connected_models.add(model)
