"""MCP extensions this server offers and the ones a client declared (``capabilities.extensions``).

An extension is named by its identifier (``io.modelcontextprotocol/tasks``,
``io.modelcontextprotocol/oauth-client-credentials``, ...) and carries a settings object. The server
announces the registered ones in ``capabilities.extensions`` of ``server/discover`` (2026-07-28) and
of ``initialize`` (2025-11-25); a client declares the ones it supports in its own
``capabilities.extensions`` (the request's ``_meta`` in 2026-07-28, ``initialize`` in 2025-11-25).
A feature that needs the client's support asks :func:`client_extension` with the capabilities the
request context holds.

Apps register their extensions once, from ``AppConfig.ready()``::

    register_extension("io.modelcontextprotocol/tasks", lambda: {"requests": {...}})
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

ExtensionSettings = Mapping[str, Any] | Callable[[], Mapping[str, Any] | None]

_registered: dict[str, ExtensionSettings] = {}
_eras: dict[str, frozenset[str]] = {}


def register_extension(
    identifier: str, settings: ExtensionSettings, *, eras: Iterable[str] = ("legacy", "modern")
) -> None:
    """Offer the extension ``identifier`` with ``settings`` (a mapping, or a callable returning one or
    ``None`` when the extension is off, read each time capabilities are built) in ``eras``
    (``"legacy"``: ``initialize``; ``"modern"``: ``server/discover``). Registering the same
    identifier again replaces its settings."""
    _registered[identifier] = settings
    _eras[identifier] = frozenset(eras)


def unregister_extension(identifier: str) -> None:
    """Stop offering ``identifier`` (no error when it was not registered)."""
    _registered.pop(identifier, None)
    _eras.pop(identifier, None)


def server_extensions(era: str | None = None) -> dict[str, dict[str, Any]]:
    """``{identifier: settings}`` of every extension offered (in ``era`` when given), for
    ``capabilities.extensions``."""
    offered: dict[str, dict[str, Any]] = {}
    for identifier, settings in _registered.items():
        if era is not None and era not in _eras.get(identifier, (era,)):
            continue
        value = settings() if callable(settings) else settings
        if value is not None:
            offered[identifier] = dict(value)
    return offered


def client_extension(client_capabilities: Mapping[str, Any], identifier: str) -> dict[str, Any] | None:
    """The settings the client declared for ``identifier`` in its capabilities, or ``None`` when it did
    not declare the extension (a declared non-object counts as not declared)."""
    extensions = client_capabilities.get("extensions")
    if not isinstance(extensions, Mapping):
        return None
    settings = extensions.get(identifier)
    return dict(settings) if isinstance(settings, Mapping) else None
