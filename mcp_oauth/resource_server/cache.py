"""Caches of the resource server's hot path, with their invalidation.

Two caches serve a ``tools/call`` (or any bearer-protected request) without a database query:

* **Protected-resource registry, in process.** :func:`resource_by_uri` answers from a dict of
  the enabled :class:`~mcp_oauth.models.ProtectedResource` rows: the site-wide ones loaded on
  first use, an organization's endpoint the first time it is asked for (one query).
  Every worker checks one shared *generation* key (``mcp_oauth:resources:gen`` in
  ``MCP_OAUTH["TOKEN_CACHE"]``) per lookup and reloads when it changed; saving or deleting a
  resource bumps it, so a disabled resource stops being served on every worker at once.
* **Token principals, in the shared cache.** :func:`access_token_by_checksum` keeps the
  ``AccessToken`` row (with its ``application`` and ``user``) under
  ``mcp_oauth:token:<sha256 of the token>`` for at most ``TOKEN_CACHE_SECONDS`` and never
  past the token's expiry. The raw token is never a key or a value.

Invalidation (signals, effective on every worker when the cache is shared; with a cache of each
process's own, such as the embedded default's ``LocMemCache``, the same receivers also bump the
database's revocation stamp, which every process reads at most every
``REVOCATION_CHECK_SECONDS``: :mod:`mcp_oauth.resource_server.revocation`):

==========================================  ==================================================
event                                       effect
==========================================  ==================================================
``AccessToken`` saved or deleted            its entry is replaced by a tombstone
(RFC 7009 revocation deletes the row)
user saved (``is_active`` false, …) or      every token entry of the user: tombstone
deleted
``Application`` saved or deleted            every token entry of the client: tombstone
``ProtectedResource`` saved or deleted      the resource generation changes
``Organization`` saved or deleted           the resource generation changes (the registry keeps
                                            the organizations: ``is_active``, ``enabled_tools``)
``OrganizationMembership`` saved or         every token entry of the user: tombstone (entries
deleted                                     keep the user's memberships)
``TokenOrganization`` saved or deleted      its token's entry: tombstone
``OrganizationClient`` saved or deleted     every token entry of the client: tombstone
(the last three: :mod:`.organization_receivers`)
==========================================  ==================================================

A tombstone (kept ``TOMBSTONE_SECONDS``) rather than a delete closes the race where a
request that read the row before the change writes it back after the invalidation: entries
are written with ``cache.add``, which never replaces a tombstone. Invalidation runs at once,
and again after the transaction commits when the first write failed or the transaction was long
(:func:`tombstone`).

Bulk ``QuerySet.update()`` sends no signal: call :func:`forget_user_tokens`,
:func:`forget_application_tokens` or :func:`bump_resource_generation` after one.

A cache outage degrades to database lookups (logged), never to a refused request.

**Without a thread hop.** An async front end first tries :func:`aget_many` (one ``MGET`` from
the event loop with a backend that has ``native_async`` reads, such as
:class:`mcp_oauth.shared.redis_cache.RedisCache`; a plain read of an in-process backend; the same
bytes are not decoded twice, :mod:`~mcp_oauth.resource_server.decoded`) and
:func:`resource_from_generation` / :func:`token_from_entry` on what it got; anything missing,
stale or revoked sends it to the synchronous functions above (one thread hop, the database).
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django.db import InterfaceError, OperationalError, transaction
from django.db.models.signals import post_delete, post_save
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.dpop.bindings import JKT_ATTRIBUTE, binding_subquery
from mcp_oauth.models import (
    Organization,
    ProtectedResource,
)
from mcp_oauth.resource_server import organizations
from mcp_oauth.resource_server.actors import ACTOR_ATTRIBUTE, actor_subquery
from mcp_oauth.resource_server.decoded import TOMBSTONE, DecodedEntries
from mcp_oauth.resource_server.resource_registry import ResourceRegistry
from mcp_oauth.resource_server.revocation import bump_stamp, entry_is_current, is_local, on_change, tag, watch
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.overload import UNAVAILABLE_ERRORS

__all__ = [
    "CACHE_ERRORS",
    "RESOURCE_GENERATION_KEY",
    "TOKEN_PREFIX",
    "access_token_by_checksum",
    "aadd_and_get_many",
    "aget_many",
    "cache_entry",
    "resource_from_generation",
    "token_from_entry",
    "tombstone",
    "announce_generation",
    "bump_resource_generation",
    "organization_by_pk",
    "organization_from_generation",
    "forget_application_tokens",
    "forget_token",
    "forget_user_tokens",
    "resource_by_uri",
    "token_checksum",
]

logger = logging.getLogger("mcp_oauth.resource_server")

TOKEN_PREFIX = "mcp_oauth:token:"
RESOURCE_GENERATION_KEY = "mcp_oauth:resources:gen"
#: How long an invalidated token entry refuses to be re-cached (seconds): longer than any request.
TOMBSTONE_SECONDS = 60


def _cache():
    return caches[mcp_oauth_settings.TOKEN_CACHE]


def _cache_errors() -> tuple[type[BaseException], ...]:
    return tuple(error for error in UNAVAILABLE_ERRORS if error not in (OperationalError, InterfaceError))


_CACHE_ERRORS = _cache_errors()
#: The errors of an unavailable cache (what the synchronous paths log and get around).
CACHE_ERRORS = _CACHE_ERRORS


def token_checksum(token: str) -> str:
    """SHA-256 hex digest of a raw token: DOT's ``token_checksum`` column and the cache key."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- tokens ----------------------------------------------------------------------------------


def _load_token(checksum: str) -> Any:
    """The token row with its client and user, its DPoP binding (``cnf.jkt``, RFC 9449 §6.1)
    as the attribute ``dpop_jkt`` (None: a bearer token), its ``TokenOrganization``'s
    organization id (:data:`~.organizations.ORGANIZATION_ATTRIBUTE`) and its token-exchange actor
    (:data:`~.actors.ACTOR_ATTRIBUTE`, RFC 8693 §4.1), in one query; when it acts
    for an organization, its user's memberships per the adapter
    (:data:`~.organizations.MEMBERSHIPS_ATTRIBUTE`, the default adapter: one more query)."""
    token = (
        get_access_token_model()
        .objects.select_related("application", "user")
        .annotate(
            **{
                JKT_ATTRIBUTE: binding_subquery(),
                organizations.ORGANIZATION_ATTRIBUTE: organizations.organization_subquery(),
                ACTOR_ATTRIBUTE: actor_subquery(),
            }
        )
        .filter(token_checksum=checksum)
        .first()
    )
    if token is not None:
        bound = list(token.resource or [])
        resource = _registry.loaded(bound[0]) if len(bound) == 1 else None
        if organizations.needs_memberships(token, resource):
            token.__dict__[organizations.MEMBERSHIPS_ATTRIBUTE] = organizations.load_memberships(token)
    return token


def access_token_by_checksum(checksum: str) -> Any:
    """The ``AccessToken`` whose ``token_checksum`` is ``checksum`` (``application`` and ``user``
    loaded), or None. From the shared cache when there; else one query, then cached.

    Callers still check expiry, audience, user and client state on every use: the cache only
    saves the lookup.
    """
    cache = _cache()
    key = TOKEN_PREFIX + checksum
    # A cache of this process's own: the revocation stamp first (read again at most every
    # REVOCATION_CHECK_SECONDS), so that a row loaded below is tagged with a stamp read before it.
    stamp = watch.current() if is_local() else None
    try:
        entry = cache.get(key)
    except _CACHE_ERRORS as exc:
        logger.warning("token cache unavailable, reading the database: %s", exc)
        return _load_token(checksum)
    stale = False
    if entry is not None and entry != TOMBSTONE:
        if entry_is_current(entry):
            return entry
        stale = True  # cached under an older stamp: something was revoked since
    token = _load_token(checksum)
    if token is None or entry == TOMBSTONE:
        return token
    remaining = (token.expires - timezone.now()).total_seconds() if isinstance(token.expires, datetime) else 0
    timeout = min(float(mcp_oauth_settings.TOKEN_CACHE_SECONDS), remaining)
    if timeout >= 1:
        try:
            if stamp is None:
                cache.add(key, token, timeout=int(timeout))
            else:  # replaces a stale entry; a tombstone it replaces was written with a stamp bump
                (cache.set if stale else cache.add)(key, tag(token, stamp), timeout=int(timeout))
        except _CACHE_ERRORS as exc:
            logger.warning("token cache unavailable, not caching: %s", exc)
    return token


async def aget_many(keys: list[str]) -> dict[str, Any] | None:
    """The entries of ``keys`` in the token cache, read without a thread hop.

    :returns: ``{key: value}`` of the keys present, or None when this backend cannot be read
        from the event loop, or is unavailable (the caller then takes the synchronous path).
    """
    cache = _cache()
    try:
        read_raw = getattr(cache, "aget_many_raw", None)
        if read_raw is not None:
            return _decoded_values(cache, keys, await read_raw(keys))
        if getattr(cache, "native_async", False):
            return await cache.aget_many(keys)
        if isinstance(cache, (LocMemCache, DummyCache)):  # in process: no I/O to wait for
            return cache.get_many(keys)
    except _CACHE_ERRORS:
        return None  # the synchronous path logs the outage
    return None


async def aadd_and_get_many(add_key: str, timeout: int, keys: list[str]) -> tuple[bool, dict[str, Any]] | None:
    """``cache.add(add_key, 1, timeout)`` and :func:`aget_many` of ``keys`` in one round trip from
    the event loop (the DPoP ``jti`` record with the token lookup, :mod:`mcp_oauth.dpop.replay`).

    :returns: ``(added, {key: value})``, or None when this backend cannot do it from the event
        loop or is unavailable (nothing is known to be recorded then; the caller takes the
        synchronous path).
    """
    cache = _cache()
    try:
        combined = getattr(cache, "aadd_get_many_raw", None)
        if combined is not None:
            added, raws = await combined(add_key, b"1", timeout, keys)
            return added, _decoded_values(cache, keys, raws)
        if isinstance(cache, LocMemCache):  # in process: no I/O to wait for
            return bool(cache.add(add_key, 1, timeout=timeout)), cache.get_many(keys)
    except _CACHE_ERRORS:
        return None
    return None


#: Token entries and the resource generation as decoded by this process, with their bytes.
_decoded = DecodedEntries(lambda: mcp_oauth_settings.DECODED_TOKEN_ENTRIES)


def _decoded_values(cache: Any, keys: list[str], raws: list[bytes | None]) -> dict[str, Any]:
    """``{key: value}`` of the keys present; token entries and the resource generation through
    :data:`_decoded` (the same bytes are not decoded twice), the rest decoded as stored."""
    loads = cache.loads
    values: dict[str, Any] = {}
    for key, raw in zip(keys, raws, strict=True):
        if raw is None:
            continue
        if key.startswith(TOKEN_PREFIX) or key == RESOURCE_GENERATION_KEY:
            values[key] = _decoded.decode(key, raw, loads)
        else:
            values[key] = loads(raw)
    return values


def token_from_entry(entry: Any) -> Any:
    """The cached ``AccessToken`` of a token-cache entry, or None (absent, revoked, or cached by a
    process-local cache under an older revocation stamp: ask the database)."""
    if entry is None or entry == TOMBSTONE or not entry_is_current(entry):
        return None
    return entry


def cache_entry(key: str, value: Any, timeout: float) -> None:
    """``cache.add`` (never replaces a tombstone) for at least one second; outages are logged."""
    if timeout < 1:
        return
    try:
        _cache().add(key, value, timeout=int(timeout))
    except _CACHE_ERRORS as exc:
        logger.warning("cache unavailable, not caching: %s", exc)


def _write_tombstones(keys: list[str]) -> bool:
    """Replace the entries of ``keys`` by tombstones; False when the cache refused (logged)."""
    try:
        if len(keys) == 1:  # one SET instead of a MULTI/EXEC pipeline
            _cache().set(keys[0], TOMBSTONE, timeout=TOMBSTONE_SECONDS)
        else:
            _cache().set_many(dict.fromkeys(keys, TOMBSTONE), timeout=TOMBSTONE_SECONDS)
    except _CACHE_ERRORS as exc:
        logger.error("cache unavailable: could not invalidate %d entries: %s", len(keys), exc)
        return False
    return True


def tombstone(keys: list[str]) -> None:
    """Replace the entries of ``keys`` by tombstones now, and again once the transaction commits
    when that is still needed.

    Written before the commit, a tombstone already covers every reader: one that read the row
    before the commit cannot cache it afterwards (``cache.add`` never replaces a tombstone), and
    after the commit the row is gone or changed. It is written again after the commit when the
    first write failed, or when it could expire before the readers of the old row are done (a
    transaction that ran longer than half of ``TOMBSTONE_SECONDS``).
    """
    if not keys:
        return
    written_at = time.monotonic()
    written = _write_tombstones(keys)

    def again() -> None:
        if not written or time.monotonic() - written_at > TOMBSTONE_SECONDS / 2:
            _write_tombstones(keys)

    transaction.on_commit(again)


#: Set by :func:`batched_invalidation`: what to invalidate at the end of the block.
_pending: ContextVar[dict[str, list] | None] = ContextVar("mcp_oauth_pending_token_invalidation", default=None)


@contextmanager
def batched_invalidation() -> Iterator[None]:
    """Within the block, the token invalidations asked for (:func:`forget_token`,
    :func:`forget_application_tokens`) are gathered and made once at its end, in one cache write
    and at most one query (a bulk deletion — a batch of pruned clients — would otherwise cost a
    query and a cache round trip per row). Leave the block inside the transaction, as the
    invalidation is made again after the commit."""
    pending: dict[str, list] = {"checksums": [], "applications": []}
    token = _pending.set(pending)
    try:
        yield
    finally:
        _pending.reset(token)
        checksums = pending["checksums"]
        if pending["applications"]:
            checksums += list(
                get_access_token_model()
                .objects.filter(application_id__in=pending["applications"])
                .values_list("token_checksum", flat=True)
            )
        _now_and_on_commit(checksums)


def _now_and_on_commit(checksums: list[str]) -> None:
    tombstone([TOKEN_PREFIX + checksum for checksum in checksums])
    bump_stamp()  # a cache of this process's own: the other processes learn it from the database


def forget_token(checksum: str) -> None:
    """Invalidate the cached lookup of one token (by its checksum), now and after commit."""
    if checksum:
        pending = _pending.get()
        if pending is not None:
            pending["checksums"].append(checksum)
            return
        _now_and_on_commit([checksum])


def forget_user_tokens(user_pk: Any) -> None:
    """Invalidate the cached lookups of every access token of the user ``user_pk``."""
    checksums = list(get_access_token_model().objects.filter(user_id=user_pk).values_list("token_checksum", flat=True))
    _now_and_on_commit(checksums)


def forget_application_tokens(application_pk: Any) -> None:
    """Invalidate the cached lookups of every access token of the client ``application_pk``."""
    pending = _pending.get()
    if pending is not None:
        pending["applications"].append(application_pk)
        return
    checksums = list(
        get_access_token_model().objects.filter(application_id=application_pk).values_list("token_checksum", flat=True)
    )
    _now_and_on_commit(checksums)


# --- protected resources ---------------------------------------------------------------------


def _current_generation() -> Any:
    """The shared resource generation (:data:`RESOURCE_GENERATION_KEY`), a new one written when
    the cache has none; with the cache unreachable a value equal to nothing (the registry reloads)."""
    if is_local():
        watch.current()  # a changed stamp clears this registry (on_change below)
    try:
        cache = _cache()
        generation = cache.get(RESOURCE_GENERATION_KEY)
        if generation is None:
            # First worker up, or the cache was flushed or restarted: a new generation
            # makes every worker reload.
            cache.add(RESOURCE_GENERATION_KEY, uuid.uuid4().hex, timeout=None)
            generation = cache.get(RESOURCE_GENERATION_KEY)
        return generation
    except _CACHE_ERRORS as exc:
        logger.warning("resource generation unavailable, reloading resources: %s", exc)
        return object()  # unknown: never equal, so the registry reloads


_registry = ResourceRegistry(_current_generation)


def resource_by_uri(uri: str) -> ProtectedResource:
    """The enabled resource whose canonical URI equals the canonical form of ``uri``.

    Same contract as ``ProtectedResource.objects.get_by_uri`` (the returned row is shared:
    do not modify it). One cache read per call, no query while nothing changed.

    :raises ProtectedResource.DoesNotExist: no enabled resource has that URI.
    :raises mcp_oauth.shared.resource_uris.InvalidResource: ``uri`` is not a resource URI.
    """
    return _registry.get(uri)


def default_resource() -> ProtectedResource:
    """The enabled default resource: same contract as ``ProtectedResource.objects.default()``
    (the returned row is shared: do not modify it), from the registry.

    :raises ProtectedResource.DoesNotExist: no enabled default resource.
    """
    return _registry.default()


def resource_from_generation(uri: str, generation: Any) -> ProtectedResource | None:
    """The enabled resource of ``uri`` when ``generation`` (the value of
    :data:`RESOURCE_GENERATION_KEY` just read) is the one this process loaded; None otherwise
    (unknown URI, or the registry must reload: call :func:`resource_by_uri`)."""
    return _registry.peek(uri, generation)


def organization_by_pk(pk: Any) -> Organization | None:
    """The organization ``pk`` from the registry (the returned row is shared: do not modify it);
    reloaded with the resources when an organization or a resource changes. None: no such row."""
    return _registry.organization(pk)


def organization_from_generation(pk: Any, generation: Any) -> Organization | None:
    """The organization ``pk`` when ``generation`` is the one this process loaded and it is
    known; None otherwise (call :func:`organization_by_pk`)."""
    return _registry.peek_organization(pk, generation)


def announce_generation(key: str, clear: Callable[[], None], what: str) -> None:
    """Make every worker reload what the shared generation ``key`` stands for: ``clear`` this
    process's copy and write a new generation, now and after the transaction commits (a reader
    between the two reloads the rows of before the commit, then again); bump the revocation
    stamp for process-local caches. A cache outage is logged (``what`` names the change)."""

    def bump() -> None:
        clear()
        try:
            _cache().set(key, uuid.uuid4().hex, timeout=None)
        except _CACHE_ERRORS as exc:
            logger.error("cache unavailable: could not announce %s: %s", what, exc)

    bump()
    transaction.on_commit(bump)
    bump_stamp(config=True)


def bump_resource_generation() -> None:
    """Make every worker reload its resource registry (now and after the transaction commits)."""
    announce_generation(RESOURCE_GENERATION_KEY, _registry.clear, "a resource change")


on_change(_registry.clear)
on_change(_decoded.clear)


# --- receivers -------------------------------------------------------------------------------


def _token_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created:
        forget_token(instance.token_checksum)


def _user_changed(sender: Any, instance: Any, created: bool = False, update_fields: Any = None, **kwargs: Any) -> None:
    if created or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return  # a login changes nothing a token lookup uses
    forget_user_tokens(instance.pk)


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    forget_user_tokens(instance.pk)  # its tokens went first (a cascade); the stamp says so again


def _application_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created:
        forget_application_tokens(instance.pk)


def _resource_changed(sender: Any, **kwargs: Any) -> None:
    bump_resource_generation()


def connect_receivers() -> None:
    """Connect the invalidation receivers (called once from ``MCPOAuthConfig.ready``)."""
    token_model = get_access_token_model()
    application_model = get_application_model()
    user_model = get_user_model()
    for signal in (post_save, post_delete):
        uid = "post_save" if signal is post_save else "post_delete"
        signal.connect(_token_changed, sender=token_model, dispatch_uid=f"mcp_oauth.cache.token.{uid}")
        signal.connect(_application_changed, sender=application_model, dispatch_uid=f"mcp_oauth.cache.app.{uid}")
        signal.connect(_resource_changed, sender=ProtectedResource, dispatch_uid=f"mcp_oauth.cache.resource.{uid}")
        signal.connect(_resource_changed, sender=Organization, dispatch_uid=f"mcp_oauth.cache.organization.{uid}")
    post_save.connect(_user_changed, sender=user_model, dispatch_uid="mcp_oauth.cache.user.post_save")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="mcp_oauth.cache.user.post_delete")
