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
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db.models import Model
from django.db.models.base import ModelState

__all__ = ["TOMBSTONE", "DecodedEntries", "detached_copy"]

#: The value that replaces an invalidated entry (:mod:`mcp_oauth.resource_server.cache`): never kept.
TOMBSTONE = "revoked"

#: Field value types copied one level (exact types: a set lookup is cheaper than isinstance).
_MUTABLE = frozenset((list, dict, set))


class _Copier:
    """How to copy one kept model instance: worked out once, when it is kept, so that each copy
    is a dict copy plus the few values that need their own (no scan of every field)."""

    __slots__ = ("cls", "values", "mutable", "db", "adding", "related")

    def __init__(self, instance: Model) -> None:
        self.cls = instance.__class__
        self.values = {name: value for name, value in instance.__dict__.items() if name != "_state"}
        self.mutable = tuple(name for name, value in self.values.items() if type(value) in _MUTABLE)
        for name in self.mutable:  # kept apart from the instance, which goes on to its request
            self.values[name] = self.values[name].copy()
        state = instance._state
        self.db, self.adding = state.db, state.adding
        self.related = {
            name: _Copier(related) if isinstance(related, Model) else related
            for name, related in state.fields_cache.items()
        }

    def copy(self) -> Model:
        values = self.values.copy()
        for name in self.mutable:
            values[name] = values[name].copy()
        state = ModelState()
        state.db, state.adding = self.db, self.adding
        state.fields_cache = {
            name: related.copy() if isinstance(related, _Copier) else related for name, related in self.related.items()
        }
        values["_state"] = state
        clone = self.cls.__new__(self.cls)
        clone.__dict__ = values
        return clone


def detached_copy(instance: Model) -> Model:
    """A copy of ``instance`` sharing no mutable state with it: its own ``__dict__``, its own
    ``_state`` and copies of the related instances loaded with it (``select_related``), one level
    of copy for list, dict and set field values (JSON fields). No pickling.
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
            kept = held[1]
            return kept.copy() if isinstance(kept, _Copier) else kept
        value = loads(raw)
        if isinstance(value, Model):
            kept = _Copier(value)
        elif isinstance(value, str) and value != TOMBSTONE:
            kept = value
        else:
            if key in self._entries:  # what was kept under this key is stale: a tombstone replaced it
                with self._lock:
                    self._entries.pop(key, None)
            return value
        size = self.size()
        if size > 0:
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
