"""Revocation honoured by every process when the token cache is not shared.

The token cache (:mod:`mcp_oauth.resource_server.cache`) is invalidated by signal receivers in
the process that makes the change. With a shared cache (Redis, ``MCP_OAUTH["TOKEN_CACHE"]`` on
a backend every process reads) that reaches every worker at once. With a cache of the process's
own (``LocMemCache``: the embedded default, ``make run``) it reached no other process: a user
deleted from ``manage.py shell``, a Celery task or a second worker kept a working token for up
to ``TOKEN_CACHE_SECONDS``.

**The stamp.** With a token cache that is not shared (:func:`is_local`), every change that the
receivers invalidate (an access token saved or deleted, RFC 7009 revocation included; a user
saved or deleted; a client saved or deleted; a protected resource or trust rule changed; the
explicit ``forget_*`` / ``bump_*`` calls after a bulk ``update()``) also runs
:func:`bump_stamp`: one ``UPDATE`` of the one :class:`~mcp_oauth.models.RevocationStamp` row,
in the change's own transaction, so the new stamp is visible exactly when the change is.

**The watch.** Each process keeps the stamp it read last (:data:`watch`) and when. A token-cache
entry is written tagged with the stamp read *before* its row was loaded, and used only while that
is still the stamp this process knows (:func:`entry_is_current`). The hot path
(:func:`~mcp_oauth.resource_server.authentication.authenticate_bearer_cached`) trusts the known
stamp for ``REVOCATION_CHECK_SECONDS`` (:meth:`RevocationWatch.fresh`); past that, the request
takes the thread path, which re-reads the stamp (one query) before the cache
(:meth:`RevocationWatch.current`). A changed stamp makes every token entry tagged with an older
one a miss (one query each, on next use); a changed ``config_version`` (a client, resource or
trust rule) also drops this process's resource registry and the token endpoint's client memory
(:func:`on_change`). A process's own bump is taken as known once it commits (``UPDATE …
RETURNING``), without a read.

**The bound.** A change committed by another process is honoured by a process under traffic
within ``REVOCATION_CHECK_SECONDS`` (1 s by default) plus the time of one request; a process
that served nothing for that long re-reads the stamp on its next request, before answering it.
Measured by ``bench/revocation.py``; see ``docs/explanation/security-model.md``.

With a shared cache nothing here runs on the request path (the stamp is neither bumped nor read):
the tombstones of the shared cache already reach every worker.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache.backends.locmem import LocMemCache
from django.core.signals import setting_changed
from django.db import connections, router, transaction
from django.db.models import F
from django.utils.module_loading import import_string

from mcp_oauth.models import RevocationStamp
from mcp_oauth.models.revocation import STAMP_PK
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "STAMP_ATTRIBUTE",
    "RevocationWatch",
    "bump_stamp",
    "entry_is_current",
    "is_local",
    "on_change",
    "read_stamp",
    "tag",
    "watch",
]

logger = logging.getLogger("mcp_oauth.resource_server")

#: The attribute of a cached ``AccessToken`` that holds the stamp it was loaded under.
STAMP_ATTRIBUTE = "_mcp_revocation_stamp"


@functools.cache
def _is_local(alias: str, shared: Any) -> bool:
    if shared is not None:
        return not shared
    backend = str(settings.CACHES.get(alias, {}).get("BACKEND", ""))
    try:
        backend_class = import_string(backend)
    except ImportError:
        return False
    return isinstance(backend_class, type) and issubclass(backend_class, LocMemCache)


def is_local() -> bool:
    """True when ``MCP_OAUTH["TOKEN_CACHE"]`` is not shared between processes: ``TOKEN_CACHE_SHARED``
    is False, or it is None and the alias's backend is a ``LocMemCache`` (or a subclass)."""
    return _is_local(mcp_oauth_settings.TOKEN_CACHE, mcp_oauth_settings.TOKEN_CACHE_SHARED)


def read_stamp() -> tuple[int, int]:
    """``(version, config_version)`` in the database (one query); zeros when its row is missing."""
    row = RevocationStamp.objects.filter(pk=STAMP_PK).values_list("version", "config_version").first()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def _increment(config: bool) -> tuple[int, int] | None:
    """Increment the row; its new ``(version, config_version)`` when this statement could say
    (``UPDATE … RETURNING``: PostgreSQL, SQLite), else None."""
    table = connections[router.db_for_write(RevocationStamp)]
    columns = "version = version + 1" + (", config_version = config_version + 1" if config else "")
    name = table.ops.quote_name(RevocationStamp._meta.db_table)
    if table.vendor in ("postgresql", "sqlite"):
        with table.cursor() as cursor:
            cursor.execute(f"UPDATE {name} SET {columns} WHERE id = %s RETURNING version, config_version", [STAMP_PK])
            row = cursor.fetchone()
        if row is not None:
            return int(row[0]), int(row[1])
        _recreate(config)
        return None
    changes = {"version": F("version") + 1, **({"config_version": F("config_version") + 1} if config else {})}
    if not RevocationStamp.objects.filter(pk=STAMP_PK).update(**changes):
        _recreate(config)
    return None


def _recreate(config: bool) -> None:
    """The row was removed (a flushed test database): start again above every known value."""
    with transaction.atomic():
        start = max(watch.version or 0, watch.config_version or 0) + 1
        stamp, created = RevocationStamp.objects.get_or_create(
            pk=STAMP_PK, defaults={"version": start, "config_version": start}
        )
        if not created:
            RevocationStamp.objects.filter(pk=STAMP_PK).update(
                version=F("version") + 1, config_version=F("config_version") + (1 if config else 0)
            )


def bump_stamp(*, config: bool = False) -> None:
    """Increment the stamp in the current transaction (autocommit: at once), when the token cache
    is not shared; nothing otherwise.

    :param config: a client, resource or trust rule changed (the in-process registries of every
        process are dropped), not only a token or user.

    The row is locked until the transaction ends (PostgreSQL): concurrent revocations queue on it.
    Once the transaction commits, this process takes the new stamp as its own without reading it
    again when nothing else changed it meanwhile (else it reads it on its next request).

    :raises django.db.DatabaseError: the stamp could not be written (the change fails with it:
        better than a revocation no other process would honour).
    """
    if not is_local():
        return
    known = (watch.version, watch.config_version)
    new = _increment(config)

    def adopt() -> None:
        if new is None or known[0] is None or not watch.adopt(known, new):
            watch.expire()

    transaction.on_commit(adopt)


_on_change: list[Callable[[], None]] = []


def on_change(callback: Callable[[], None]) -> Callable[[], None]:
    """Run ``callback`` (no arguments) in this process whenever the ``config_version`` it reads
    has changed (a client, resource or trust rule changed in another process): drop what was kept
    for the old one. Usable as a decorator; returns ``callback``."""
    _on_change.append(callback)
    return callback


class RevocationWatch:
    """The stamp this process read last, and when (``time.monotonic()``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.version: int | None = None
        self.config_version: int | None = None
        self.checked_at = float("-inf")

    def fresh(self) -> bool:
        """True while the known stamp was read less than ``REVOCATION_CHECK_SECONDS`` ago."""
        return time.monotonic() - self.checked_at < mcp_oauth_settings.REVOCATION_CHECK_SECONDS

    def current(self) -> int:
        """The stamp to tag and check entries with: the known one while :meth:`fresh`, else read
        again (one query; a change runs the :func:`on_change` callbacks first)."""
        version = self.version
        if version is not None and self.fresh():
            return version
        started = time.monotonic()
        read, config = read_stamp()
        with self._lock:
            changed = self.config_version is not None and config != self.config_version
            self.version, self.config_version = read, config
            self.checked_at = started  # from before the read: never trusted past the bound
        if changed:
            for callback in _on_change:
                callback()
        return read

    def adopt(self, known: tuple[int | None, int | None], new: tuple[int, int]) -> bool:
        """Take ``new`` (this process's own bump, committed) as the known stamp when the known one
        is still ``known`` and ``new`` holds no other change; False otherwise (read it again)."""
        with self._lock:
            if (self.version, self.config_version) != known or known[0] is None or known[1] is None:
                return False
            if new[0] != known[0] + 1 or new[1] - known[1] not in (0, 1):
                return False
            self.version, self.config_version = new
            return True

    def expire(self) -> None:
        """Re-read the stamp on the next use (this process changed it)."""
        self.checked_at = float("-inf")

    def reset(self) -> None:
        """Forget the known stamp (tests, a setting change)."""
        with self._lock:
            self.version, self.config_version, self.checked_at = None, None, float("-inf")


#: This process's watch.
watch = RevocationWatch()


def tag(token: Any, version: int) -> Any:
    """Mark ``token`` (a model instance about to be cached) as loaded under ``version``; returns it."""
    token.__dict__[STAMP_ATTRIBUTE] = version
    return token


def entry_is_current(entry: Any) -> bool:
    """Whether a cached token may be used: always with a shared cache; with a cache of this
    process's own, when it was loaded under the stamp this process knows now."""
    if not is_local():
        return True
    known = watch.version
    return known is not None and entry.__dict__.get(STAMP_ATTRIBUTE) == known


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_OAUTH", "CACHES"):
        _is_local.cache_clear()
        watch.reset()


setting_changed.connect(_settings_changed)
