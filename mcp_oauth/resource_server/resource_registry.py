"""The protected-resource registry of a worker: enabled :class:`~mcp_oauth.models.ProtectedResource`
rows by canonical URI and their organizations, kept until the shared resource generation changes
(:mod:`mcp_oauth.resource_server.cache` reads it and serves :func:`~.cache.resource_by_uri` and the
other lookups from one instance; its signals announce a new generation).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mcp_oauth.models import Organization, ProtectedResource
from mcp_oauth.resource_server import registry_freeze
from mcp_oauth.shared.resource_uris import canonicalize_resource

__all__ = ["ResourceRegistry"]


class ResourceRegistry:
    """The enabled resources by canonical URI, reloaded when the shared generation changes.

    A load reads the site-wide resources (``organization`` null: a handful); an organization's
    own endpoint (``<MCP_PATH>/o/<slug>``) and an organization are read the first time a generation
    is asked for them (one query each) and kept until the generation changes. A worker thus holds
    the organizations it serves, not every organization of the site: with 10,000 organizations a
    reload after an edit reads a few rows instead of 10,002 (and no full collection follows it),
    and the process keeps no ~70,000 objects it does not use.
    A URI asked for and not found is remembered (at most :data:`MISSES_KEPT` per generation), so a
    client repeating an unknown ``resource`` does not query each time.
    """

    #: Unknown URIs remembered per generation (past it, the oldest half is forgotten).
    MISSES_KEPT = 1024

    def __init__(self, current_generation: Callable[[], Any]) -> None:
        #: Reads the shared generation (an unknown one: a value equal to nothing, so a reload).
        self._current_generation = current_generation
        self._lock = threading.Lock()
        self._generation: Any = object()
        self._by_uri: dict[str, ProtectedResource] = {}
        #: Organizations by pk: those of the endpoints read so far, and those looked up since.
        self._organizations: dict[Any, Organization] = {}
        self._misses: dict[str, None] = {}
        self._default: ProtectedResource | None = None
        #: How many resources were kept when the process last froze them (:func:`refreeze`).
        self._frozen = 0

    def _load(self, generation: Any) -> None:
        rows = {
            row.uri: row
            for row in ProtectedResource.objects.enabled()
            .filter(organization__isnull=True)
            .select_related("organization")
        }
        defaults = [row for row in rows.values() if row.is_default]
        with self._lock:
            self._by_uri, self._organizations, self._generation = rows, {}, generation
            self._misses, self._default = {}, defaults[0] if len(defaults) == 1 else None
            self._frozen = len(rows) if len(rows) >= registry_freeze.REFREEZE_MIN_RESOURCES else 0
        registry_freeze.refreeze(len(rows))  # a site with thousands of site-wide resources

    def _lookup(self, canonical: str, generation: Any) -> ProtectedResource | None:
        """The enabled resource ``canonical`` not loaded yet (an organization's endpoint): one
        query, kept while ``generation`` is the loaded one."""
        if canonical in self._misses:
            return None
        row = ProtectedResource.objects.enabled().select_related("organization").filter(uri=canonical).first()
        grown = 0
        with self._lock:
            if self._generation == generation:
                if row is None:
                    if len(self._misses) >= self.MISSES_KEPT:
                        for uri in list(self._misses)[: self.MISSES_KEPT // 2]:
                            del self._misses[uri]
                    self._misses[canonical] = None
                else:
                    self._by_uri[canonical] = row
                    if row.organization_id is not None:
                        self._organizations.setdefault(row.organization_id, row.organization)
                    if len(self._by_uri) >= max(registry_freeze.REFREEZE_MIN_RESOURCES, 2 * self._frozen):
                        grown = self._frozen = len(self._by_uri)
        if grown:
            registry_freeze.refreeze(grown)  # doubled since the last freeze: a full collection per doubling at most
        return row

    def get(self, uri: str) -> ProtectedResource:
        canonical = canonicalize_resource(uri)
        generation = self._current_generation()
        if generation != self._generation:
            self._load(generation)
        found = self._by_uri.get(canonical) or self._lookup(canonical, generation)
        if found is None:
            raise ProtectedResource.DoesNotExist(f"no enabled protected resource {canonical!r}")
        return found

    def default(self) -> ProtectedResource:
        """The enabled default resource (reloading like :meth:`get`)."""
        generation = self._current_generation()
        if generation != self._generation:
            self._load(generation)
        if self._default is None:
            return ProtectedResource.objects.default()  # none (DoesNotExist) or, wrongly, several
        return self._default

    def loaded(self, uri: str) -> ProtectedResource | None:
        """The resource of ``uri`` as loaded now (no reload, no I/O; None: not loaded or unknown):
        the views resolve the resource before the token, so it is loaded when a token is."""
        return self._by_uri.get(uri)

    def organization(self, pk: Any) -> Organization | None:
        """The organization ``pk`` (active or not) as of the current generation; one query the
        first time a generation is asked for it. None: no such organization."""
        generation = self._current_generation()
        if generation != self._generation:
            self._load(generation)
        found = self._organizations.get(pk)
        if found is None:
            found = Organization.objects.filter(pk=pk).first()
            if found is not None:
                with self._lock:
                    if self._generation == generation:
                        self._organizations[pk] = found
        return found

    def peek_organization(self, pk: Any, generation: Any) -> Organization | None:
        """The organization ``pk`` when ``generation`` is the one loaded and it is known (else
        None: call :meth:`organization`)."""
        if generation is None or generation != self._generation:
            return None
        return self._organizations.get(pk)

    def peek(self, uri: str, generation: Any) -> ProtectedResource | None:
        """The resource when ``generation`` is the one loaded (else None: call :meth:`get`)."""
        if generation is None or generation != self._generation:
            return None
        try:
            return self._by_uri.get(canonicalize_resource(uri))
        except ValueError:
            return None

    def clear(self) -> None:
        with self._lock:
            self._generation = object()
            self._by_uri, self._organizations, self._misses, self._default = {}, {}, {}, None
