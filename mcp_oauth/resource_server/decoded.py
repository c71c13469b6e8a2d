"""Decoded token-cache entries kept by this process, each with the exact bytes it came from.

The bearer check of the hot path reads a token's entry from the shared cache on every request
(:func:`mcp_oauth.resource_server.cache.aget_many`): that read is what makes a revocation, a
deactivated user or a changed client stop a token at once on every worker. Decoding the entry
(a pickled ``AccessToken`` with its client and user, ~1.5 KB) costs more CPU than the rest of
the check. :class:`DecodedEntries` keeps the decoded object next to the bytes it was decoded
from; when the cache answers the same bytes again, the kept object is used instead of decoding
them again. Nothing else changes: the shared cache is still read on every request, and a
tombstone or a new entry (other bytes) is decoded as before. No invalidation is needed because
nothing is trusted that the cache did not answer in this request.

Each use gets its own copy of the model instances (:func:`detached_copy`): a tool that changes
``context.user`` changes only its own request's object, as when every request decoded its own.
Only entries that can be copied safely are kept: values of immutable types and plain containers
(list, dict, set, tuple trees: JSON fields) in an acyclic tree of instances. Anything else (a
value of another type, a reverse one-to-one loaded with the row) is decoded every time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db.models import Model
from django.db.models.base import ModelState

__all__ = ["TOMBSTONE", "DecodedEntries", "Unkeepable", "detached_copy"]

#: The value that replaces an invalidated entry (:mod:`mcp_oauth.resource_server.cache`): never kept.
TOMBSTONE = "revoked"

#: Values shared by every copy: immutable.
_IMMUTABLE = frozenset(
    (type(None), bool, int, float, complex, str, bytes, Decimal, datetime, date, time, timedelta, UUID)
)
#: Plain containers, copied (with what they hold) for every copy: JSON values, lists of URIs.
_CONTAINERS = frozenset((list, dict, set, frozenset, tuple))


class Unkeepable(Exception):
    """An entry this module cannot copy safely (a value of another type, a cycle): it is decoded
    every time instead of being kept."""


def _fresh(value: Any) -> Any:
    """A copy of a plain container tree (checked by :func:`_check_value`), sharing nothing mutable."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is list:
        return [_fresh(item) for item in value]
    if kind is set:
        return {_fresh(item) for item in value}
    if kind is frozenset:
        return value  # immutable, and holds only hashable (immutable) values checked below
    return tuple(_fresh(item) for item in value)


def _check_value(value: Any, depth: int = 0) -> bool:
    """True when ``value`` needs a copy per use (a container), False when it can be shared.

    :raises Unkeepable: a value of another type, or containers nested deeper than 32.
    """
    kind = type(value)
    if kind in _IMMUTABLE:
        return False
    if kind not in _CONTAINERS or depth > 32:
        raise Unkeepable(f"a {kind.__name__} value")
    items = value.items() if kind is dict else ((None, item) for item in value)
    for key, item in items:
        _check_value(key, depth + 1)
        _check_value(item, depth + 1)
    return True


class _Copier:
    """How to copy one kept model instance: worked out once, when it is kept, so that each copy
    is a dict copy plus fresh copies of its few container values.

    :raises Unkeepable: a value this module cannot copy safely, or a cycle among the instances.
    """

    __slots__ = ("cls", "values", "containers", "db", "adding", "related")

    def __init__(self, instance: Model, seen: frozenset[int] = frozenset()) -> None:
        if id(instance) in seen:
            raise Unkeepable("a cycle among the related instances")
        seen = seen | {id(instance)}
        self.cls = instance.__class__
        self.values = {name: value for name, value in instance.__dict__.items() if name != "_state"}
        self.containers = tuple(name for name, value in self.values.items() if _check_value(value))
        for name in self.containers:  # kept apart from the instance, which goes on to its request
            self.values[name] = _fresh(self.values[name])
        state = instance._state
        self.db, self.adding = state.db, state.adding
        self.related: dict[str, Any] = {}
        for name, related in state.fields_cache.items():
            if isinstance(related, Model):
                self.related[name] = _Copier(related, seen)
            elif related is None:
                self.related[name] = None
            else:
                raise Unkeepable(f"a {type(related).__name__} in the related-object cache")

    def copy(self) -> Model:
        values = self.values.copy()
        for name in self.containers:
            values[name] = _fresh(values[name])
        state = ModelState()
        state.db, state.adding = self.db, self.adding
        state.fields_cache = {
            name: related.copy() if related is not None else None for name, related in self.related.items()
        }
        values["_state"] = state
        clone = self.cls.__new__(self.cls)
        clone.__dict__ = values
        return clone


def detached_copy(instance: Model) -> Model:
    """A copy of ``instance`` sharing no mutable state with it: its own ``__dict__``, its own
    ``_state``, copies of the related instances loaded with it (``select_related``) and of its
    container values (list, dict, set, tuple trees: JSON fields). No pickling.

    :raises Unkeepable: a value of another type (it could be mutable), or a cycle among the
        related instances (a reverse one-to-one loaded with the row).
    """
    return _Copier(instance).copy()


class DecodedEntries:
    """At most ``size()`` decoded entries of this process, by cache key, each kept with its bytes.

    :meth:`decode` answers what ``loads(raw)`` would answer. Model instances (token entries) and
    strings (the resource generation) are kept; anything else (a tombstone, a session entry) is
    decoded every time. When full, the entry kept longest is dropped first. Safe to use from
    several threads.

    :param size: how many entries to keep at most (read on each insertion; 0: keep none).
    """

    def __init__(self, size: Callable[[], int]) -> None:
        self.size = size
        self._entries: dict[str, tuple[bytes, Any]] = {}  # key -> (bytes, str or _Copier)
        self._lock = threading.Lock()

    def decode(self, key: str, raw: bytes, loads: Callable[[bytes], Any]) -> Any:
        """``loads(raw)``, or what was decoded from the same bytes under ``key`` before (a model
        instance as a copy of its own, see :func:`detached_copy`)."""
        held = self._entries.get(key)
        if held is not None and held[0] == raw:
            return held[1].copy() if isinstance(held[1], _Copier) else held[1]
        value = loads(raw)
        kept: Any
        try:
            kept = _Copier(value) if isinstance(value, Model) else None
        except Unkeepable:
            kept = None  # decoded every time, as without this module
        if kept is None and type(value) is str and value != TOMBSTONE:
            kept = value
        if kept is None:
            if key in self._entries:  # what was kept under this key is stale: a tombstone replaced it
                with self._lock:
                    self._entries.pop(key, None)
            return value
        size = self.size()
        if isinstance(size, int) and size > 0:  # anything else (mcp_oauth.E070): keep none
            with self._lock:
                self._entries.pop(key, None)
                while len(self._entries) >= size:
                    del self._entries[next(iter(self._entries))]
                self._entries[key] = (raw, kept)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
