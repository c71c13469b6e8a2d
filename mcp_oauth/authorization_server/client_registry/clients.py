"""In-process caches of the token endpoint: clients by ``client_id`` and the enabled trust rules.

Every grant looks its client up by ``client_id`` and evaluates the trust policy on it
(:mod:`mcp_oauth.authorization_server.client_registry.trust`), two queries whose answers change only when an administrator (or a
registration) changes a client or a rule. Each worker keeps them in memory, valid for one
*generation*: a key in the shared ``MCP_OAUTH["TOKEN_CACHE"]`` (``mcp_oauth:clients:gen``)
read once per token request (:func:`token_request`), together with the resource registry's
generation (:mod:`mcp_oauth.resource_server.cache`), in one ``get_many``.

Invalidation: saving or deleting an ``Application``, a :class:`~mcp_oauth.models.ClientProfile` or a
:class:`~mcp_oauth.models.TrustRule`
changes the generation at once and again after the transaction commits (a worker that read
the old row in between reloads), so a deleted, changed or denied client is refused by the
next grant on every worker. Bulk ``QuerySet.update()`` sends no signal: call
:func:`bump_clients_generation` after one (the admin's enable/disable-rules actions and the
client-secret hash upgrade do). A change that could not be announced (the writer could not
reach the cache, a bulk write without the call) applies within ``MCP_OAUTH["CLIENT_CACHE_SECONDS"]``:
no worker keeps a generation's rows longer than that.

Not cached: Client ID Metadata Document clients (URL client_ids: their staleness and
re-fetching stay with :mod:`mcp_oauth.authorization_server.cimd`), unknown client_ids, and everything when the
cache is unavailable or cannot keep a generation (a dummy cache): the database then answers.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.core.cache import caches
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from oauth2_provider.models import get_application_model

from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.models import ClientProfile, TrustRule
from mcp_oauth.resource_server.cache import CACHE_ERRORS, RESOURCE_GENERATION_KEY
from mcp_oauth.resource_server.revocation import bump_stamp, is_local, on_change, watch
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "CLIENTS_GENERATION_KEY",
    "bump_clients_generation",
    "cached_application",
    "generation_memo",
    "token_request",
]

logger = logging.getLogger("mcp_oauth.authorization_server")

CLIENTS_GENERATION_KEY = "mcp_oauth:clients:gen"

T = TypeVar("T")


def _cache():
    return caches[mcp_oauth_settings.TOKEN_CACHE]


class _Registry:
    """Rows of one generation: ``client_id -> (database alias, field names, values)`` and the enabled rules."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.generation: Any = None
        self.clients: dict[str, tuple[str, tuple[str, ...], tuple[Any, ...]]] = {}
        self.rules: list[TrustRule] | None = None
        #: Other answers kept for this generation, by name (:func:`generation_memo`).
        self.memos: dict[str, Any] = {}
        #: ``time.monotonic()`` when this generation's memory was started (seconds).
        self.started_at = 0.0

    def sync(self, generation: Any) -> None:
        """Drop what was loaded for another generation, or longer ago than ``CLIENT_CACHE_SECONDS``."""
        now = time.monotonic()
        if generation != self.generation or now - self.started_at > mcp_oauth_settings.CLIENT_CACHE_SECONDS:
            with self._lock:
                self.generation, self.clients, self.rules, self.started_at = generation, {}, None, now
                self.memos = {}

    def clear(self) -> None:
        with self._lock:
            self.generation, self.clients, self.rules, self.started_at = None, {}, None, 0.0
            self.memos = {}


_registry = _Registry()

#: The generation read by the current token request (None: no cache in use for it).
_current: ContextVar[Any] = ContextVar("mcp_oauth_clients_generation", default=None)
#: The resource registry's generation read with it (see :func:`resource_generation`).
_resource_generation: ContextVar[Any] = ContextVar("mcp_oauth_resource_generation", default=None)


def _read_generations() -> tuple[Any, Any]:
    """``(clients generation, resource generation)``; (None, None) when the cache cannot tell."""
    if is_local():
        watch.current()  # a cache of this process's own: a changed revocation stamp clears the registry
    cache = _cache()
    try:
        found = cache.get_many([CLIENTS_GENERATION_KEY, RESOURCE_GENERATION_KEY])
        generation = found.get(CLIENTS_GENERATION_KEY)
        if generation is None:  # first worker up, or the cache was flushed: start a generation
            cache.add(CLIENTS_GENERATION_KEY, uuid.uuid4().hex, timeout=None)
            generation = cache.get(CLIENTS_GENERATION_KEY)
        return generation, found.get(RESOURCE_GENERATION_KEY)
    except CACHE_ERRORS as exc:
        logger.warning("client cache unavailable, reading the database: %s", exc)
        return None, None


@contextmanager
def token_request() -> Iterator[None]:
    """Within this block (one token request) clients and trust rules come from this worker's
    memory when the shared generation says they are current; the generation is read once here.

    The trust rules are served through :func:`mcp_oauth.authorization_server.client_registry.trust.rules_snapshot`, so a site
    adapter's ``trust_verdict`` sees them as usual.
    """
    generation, resource_generation = _read_generations()
    if generation is None:
        yield
        return
    _registry.sync(generation)
    rules = _registry.rules
    if rules is None:
        rules = list(TrustRule.objects.filter(enabled=True, organization__isnull=True))
        with _registry._lock:
            if _registry.generation == generation:
                _registry.rules = rules
    token = _current.set(generation)
    resource_token = _resource_generation.set(resource_generation)
    try:
        with trust.rules_snapshot(rules):
            yield
    finally:
        _resource_generation.reset(resource_token)
        _current.reset(token)


def resource_generation() -> Any:
    """The resource registry's generation read by the current :func:`token_request`, or None."""
    return _resource_generation.get()


def cached_application(client_id: Any) -> Any:
    """A fresh ``Application`` instance for ``client_id`` from this worker's memory, loading it
    once per generation; None outside :func:`token_request`, for URL (CIMD) client_ids, for
    unknown clients and for CIMD-registered ones (the caller then asks the database)."""
    generation = _current.get()
    if generation is None or not isinstance(client_id, str) or not client_id or "://" in client_id:
        return None
    Application = get_application_model()
    entry = _registry.clients.get(client_id)
    if entry is None:
        try:
            application = Application.objects.filter(client_id=client_id).first()
        except ValueError:  # text the database cannot hold (a NUL): DOT refuses it
            return None
        if application is None or application.registration_source == Application.RegistrationSource.CIMD:
            return None
        names = tuple(field.attname for field in Application._meta.concrete_fields)
        entry = (application._state.db or "default", names, tuple(getattr(application, name) for name in names))
        with _registry._lock:
            if _registry.generation == generation:
                _registry.clients[client_id] = entry
        return application
    db, names, values = entry
    return Application.from_db(db, names, values)


def generation_memo(name: str, load: Callable[[], T]) -> T:
    """``load()``, kept in this worker's memory for the current generation (within
    :func:`token_request`; outside it, or without a usable cache, ``load()`` every time). For
    answers derived from clients and their profiles (e.g. which clients require DPoP,
    :mod:`mcp_oauth.authorization_server.token_endpoint.dpop_requirements`): a saved ``Application`` or
    ``ClientProfile`` ends them."""
    generation = _current.get()
    if generation is None:
        return load()
    memos = _registry.memos
    if name in memos:
        return memos[name]
    value = load()
    with _registry._lock:
        if _registry.generation == generation:
            _registry.memos[name] = value
    return value


#: Set by :func:`one_generation_bump`: the bumps asked for meanwhile are counted, not made.
_deferred_bumps: ContextVar[list[int] | None] = ContextVar("mcp_oauth_deferred_client_bumps", default=None)


@contextmanager
def one_generation_bump() -> Iterator[None]:
    """Within the block, :func:`bump_clients_generation` is made at most once, at its end (for a
    bulk change — deleting a batch of clients — that would otherwise bump once per row)."""
    pending: list[int] = []
    token = _deferred_bumps.set(pending)
    try:
        yield
    finally:
        _deferred_bumps.reset(token)
        if pending:
            bump_clients_generation()


def bump_clients_generation() -> None:
    """Make every worker reload its clients and trust rules (now and after the transaction commits)."""
    pending = _deferred_bumps.get()
    if pending is not None:
        pending.append(1)
        return

    def bump() -> None:
        _registry.clear()
        try:
            _cache().set(CLIENTS_GENERATION_KEY, uuid.uuid4().hex, timeout=None)
        except CACHE_ERRORS as exc:
            logger.error("cache unavailable: could not announce a client change: %s", exc)

    bump()
    transaction.on_commit(bump)
    bump_stamp(config=True)  # a cache of this process's own: the other processes learn it from the database


on_change(_registry.clear)


def _changed(sender: Any, **kwargs: Any) -> None:
    bump_clients_generation()


def _profile_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    """A profile change ends the generation, except the creation of a plain one (the first grant
    of a client creates its profile to record ``last_used_at``): nothing kept derives from it."""
    flagged = instance.dpop_bound_access_tokens or (
        isinstance(instance.metadata, dict) and "dpop_bound_access_tokens" in instance.metadata
    )
    if created and not flagged:
        return
    bump_clients_generation()


def connect_receivers() -> None:
    """Connect the invalidation receivers (called once from ``MCPOAuthConfig.ready``)."""
    application_model = get_application_model()
    for signal in (post_save, post_delete):
        uid = "post_save" if signal is post_save else "post_delete"
        signal.connect(_changed, sender=application_model, dispatch_uid=f"mcp_oauth.clients.app.{uid}")
        signal.connect(_changed, sender=TrustRule, dispatch_uid=f"mcp_oauth.clients.rule.{uid}")
        signal.connect(_profile_changed, sender=ClientProfile, dispatch_uid=f"mcp_oauth.clients.profile.{uid}")
