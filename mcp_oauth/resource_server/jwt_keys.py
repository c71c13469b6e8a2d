"""The access-token signing keys as every process holds them (RFC 9068, RFC 7517), and the
deny-list of revoked JWT access tokens.

**Key ring.** :func:`key_ring` answers from this process's memory: the published
:class:`~mcp_oauth.models.AccessTokenSigningKey` rows (their public keys as a
:class:`~mcp_oauth.shared.access_jwt.KeySet`, the JWK Set document, their schedule), loaded whole
on first use. Every process reads one shared *generation* key (:data:`KEYS_GENERATION_KEY` in
``MCP_OAUTH["TOKEN_CACHE"]``) and reloads when it changed; saving or deleting a key row bumps it
(now and after the commit), so a key published or retired reaches every worker at once. The
generation is read in the same cache round trip as the deny-list entry
(:func:`generation_and_denied`, :func:`aget_many` on the event loop), so a JWT costs no more
round trips than an opaque token. With a token cache of each process's own (the embedded
default's ``LocMemCache``), a key change also bumps the revocation stamp's ``config_version``,
which every process reads at most every ``REVOCATION_CHECK_SECONDS``.

**Deny-list.** A JWT access token is valid by its signature and lifetime; a revoked one is
refused because it is in the deny-list: ``mcp_oauth:jwt:deny:<SHA-256 of the token>`` (the
row's ``token_checksum``: the token column itself is blank at rest, RFC 9700 token storage) in the
token cache, kept until the token's ``exp``. :func:`deny` writes it when the token's row goes or
its user or membership stops standing (:mod:`mcp_oauth.resource_server.jwt_revocation`).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.core.cache import caches
from django.db import transaction
from django.utils import timezone

from mcp_oauth.models import AccessTokenSigningKey
from mcp_oauth.resource_server.cache import CACHE_ERRORS, announce_generation
from mcp_oauth.resource_server.revocation import is_local, on_change, watch
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.access_jwt import KeySet

__all__ = [
    "DENY_PREFIX",
    "KEYS_GENERATION_KEY",
    "KeyRing",
    "bump_keys_generation",
    "deny",
    "deny_key",
    "generation_and_denied",
    "key_ring",
    "key_ring_for_generation",
]

logger = logging.getLogger("mcp_oauth.resource_server")

KEYS_GENERATION_KEY = "mcp_oauth:jwt_keys:gen"
DENY_PREFIX = "mcp_oauth:jwt:deny:"

_CACHE_ERRORS = CACHE_ERRORS


def _cache():
    return caches[mcp_oauth_settings.TOKEN_CACHE]


def deny_key(checksum: str) -> str:
    """The deny-list key of the token whose SHA-256 hex digest is ``checksum``."""
    return DENY_PREFIX + checksum


@dataclass(frozen=True)
class PublishedKey:
    """One key row as loaded: ``signs_from`` / ``retire_at`` as datetimes (aware)."""

    kid: str
    alg: str
    public_jwk: dict[str, Any]
    private_key: str
    signs_from: datetime
    retire_at: datetime | None


@dataclass(frozen=True)
class KeyRing:
    """The published keys of one generation."""

    keys: tuple[PublishedKey, ...] = ()
    key_set: KeySet = field(default_factory=lambda: KeySet({}))
    #: Clients by ``client_id``, loaded once per generation (a client saved or deleted bumps it).
    applications: dict[str, Any] = field(default_factory=dict, compare=False)
    #: Tokens whose signature and claims were verified with this ring, by SHA-256 of the token
    #: (:mod:`.jwt_tokens`: a token used again is not verified again; its expiry, audience and the
    #: deny-list are checked on every use).
    verified: dict[str, Any] = field(default_factory=dict, compare=False)

    def jwks(self) -> dict[str, Any]:
        """The JWK Set document (RFC 7517 §5): the public keys published now."""
        now = timezone.now()
        return {"keys": [key.public_jwk for key in self.keys if key.retire_at is None or key.retire_at > now]}

    def signing_key(self, now: datetime | None = None) -> PublishedKey | None:
        """The key that signs at ``now``: the published key with the latest ``signs_from`` that
        has come (None: no key signs yet)."""
        now = now or timezone.now()
        due = [key for key in self.keys if key.signs_from <= now and (key.retire_at is None or key.retire_at > now)]
        return max(due, key=lambda key: key.signs_from) if due else None

    def verifying_set(self) -> KeySet:
        """The keys a token may be signed with now (published, not retired)."""
        now = timezone.now()
        retired = [key.kid for key in self.keys if key.retire_at is not None and key.retire_at <= now]
        if not retired:
            return self.key_set
        return KeySet(
            {key.kid: key for kid in self.key_set.kids if kid not in retired and (key := self.key_set.get(kid))}
        )


class _Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generation: Any = object()
        self._ring = KeyRing()

    def _load(self, generation: Any) -> KeyRing:
        rows = list(AccessTokenSigningKey.objects.published())
        keys = tuple(
            PublishedKey(row.kid, row.alg, dict(row.public_jwk), row.private_key, row.signs_from, row.retire_at)
            for row in rows
        )
        ring = KeyRing(keys, KeySet.from_jwks({"keys": [key.public_jwk for key in keys]}))
        with self._lock:
            self._ring, self._generation = ring, generation
        return ring

    def current_generation(self) -> Any:
        if is_local():
            watch.current()  # a changed config stamp clears this ring (on_change below)
        try:
            cache = _cache()
            generation = cache.get(KEYS_GENERATION_KEY)
            if generation is None:
                cache.add(KEYS_GENERATION_KEY, uuid.uuid4().hex, timeout=None)
                generation = cache.get(KEYS_GENERATION_KEY)
            return generation
        except _CACHE_ERRORS as exc:
            logger.warning("key generation unavailable, reloading keys: %s", exc)
            return object()

    def get(self, generation: Any = None) -> KeyRing:
        if generation is None:
            generation = self.current_generation()
        if generation != self._generation:
            return self._load(generation)
        return self._ring

    def peek(self, generation: Any) -> KeyRing | None:
        if generation is None or generation != self._generation:
            return None
        return self._ring

    def clear(self) -> None:
        with self._lock:
            self._generation = object()
            self._ring = KeyRing()


_registry = _Registry()
on_change(_registry.clear)


def key_ring(generation: Any = None) -> KeyRing:
    """The key ring of the current generation (one cache read when ``generation`` is not given;
    one query when it changed since this process loaded it)."""
    return _registry.get(generation)


def key_ring_for_generation(generation: Any) -> KeyRing | None:
    """The ring when ``generation`` is the one this process loaded (no I/O), else None."""
    return _registry.peek(generation)


def bump_keys_generation() -> None:
    """Make every process reload its key ring (now and after the transaction commits)."""
    announce_generation(KEYS_GENERATION_KEY, _registry.clear, "a signing-key change")


def generation_and_denied(checksum: str) -> tuple[Any, bool | None]:
    """The key generation and whether the token ``checksum`` is denied, in one cache round trip.

    A cache outage answers an unknown generation (the ring reloads from the database) and None for
    *denied*: unknown (the caller asks the database whether the token's row still stands; logged)."""
    key = deny_key(checksum)
    try:
        values = _cache().get_many([KEYS_GENERATION_KEY, key])
    except _CACHE_ERRORS as exc:
        logger.warning("token cache unavailable, reading the database for a JWT access token: %s", exc)
        return object(), None
    generation = values.get(KEYS_GENERATION_KEY)
    if generation is None:
        generation = _registry.current_generation()
    return generation, key in values


def deny(entries: list[tuple[str, float]]) -> None:
    """Put the tokens ``[(checksum, exp), …]`` (``exp`` in seconds since the epoch) in the deny-list
    until they expire, now and again after the transaction commits.

    A cache outage is logged as an error (``mcp_oauth.resource_server``) and does not fail the
    revocation (a user's deletion must not fail because Redis is away); while the cache is away the
    resource server reads the token's row instead (:func:`generation_and_denied`), but a token whose
    entry was never written is accepted again once the cache is back, until its ``exp``."""
    now = time.time()
    values = {deny_key(checksum): 1 for checksum, exp in entries if exp > now}
    if not values:
        return
    timeout = max(1, int(max(exp for _, exp in entries) - now) + 1)

    def write() -> None:
        try:
            _cache().set_many(values, timeout=timeout)
        except _CACHE_ERRORS as exc:
            logger.error("cache unavailable: %d JWT access tokens not put in the deny-list: %s", len(values), exc)

    write()
    transaction.on_commit(write)
