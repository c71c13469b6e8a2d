"""The server capabilities announced by ``initialize`` (2025-11-25) and ``server/discover`` (2026-07-28).

The transport core announces what it serves itself (``tools``, ``logging``, the registered
extensions, :mod:`.extensions`); features built on top of it (resources, prompts, completion:
:mod:`mcp_oauth.mcp_server.registry`) add theirs through a provider that the composition module
(:mod:`mcp_oauth.mcp_server.features`) registers here::

    register_provider(lambda: {"prompts": types.PromptsCapability(list_changed=True)})

A provider returns ``ServerCapabilities`` fields (name -> ``mcp_types`` capability model), read
each time capabilities are built (a registry may gain its first item at run time); this module
never imports a feature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types

from mcp_oauth.mcp_server.transport import subscriptions
from mcp_oauth.mcp_server.transport.extensions import server_extensions

__all__ = [
    "CapabilityProvider",
    "discover_capabilities",
    "feature_capabilities",
    "initialize_capabilities",
    "register_provider",
    "unregister_provider",
]

#: ``() -> {field: capability model}``: ``ServerCapabilities`` fields a feature announces.
CapabilityProvider = Callable[[], Mapping[str, Any]]

_providers: list[CapabilityProvider] = []

#: Features whose capability is announced only while a provider names it (nothing to serve: no entry).
_PROVIDED = ("resources", "prompts", "completions")


def register_provider(provider: CapabilityProvider) -> None:
    """Announce the capabilities ``provider`` returns (registering the same provider twice is a no-op)."""
    if provider not in _providers:
        _providers.append(provider)


def unregister_provider(provider: CapabilityProvider) -> None:
    """Stop asking ``provider`` (no error when it was not registered)."""
    if provider in _providers:
        _providers.remove(provider)


def feature_capabilities() -> dict[str, Any]:
    """Every provider's fields merged (a later provider wins on the same field)."""
    merged: dict[str, Any] = {}
    for provider in _providers:
        merged.update(provider())
    return merged


def initialize_capabilities() -> types.ServerCapabilities:
    """``capabilities`` of the ``initialize`` result (2025-11-25 sessions)."""
    return types.ServerCapabilities(
        tools=types.ToolsCapability(list_changed=False),
        logging=types.LoggingCapability(),
        extensions=server_extensions("legacy") or None,
        **feature_capabilities(),
    )


def discover_capabilities() -> dict[str, Any]:
    """``capabilities`` of the ``server/discover`` result (2026-07-28): list changes are announced
    for what ``subscriptions/listen`` streams can deliver (:data:`.subscriptions.supported_filters`),
    resources, prompts and completions only while a feature serves them."""
    filters = subscriptions.supported_filters
    capabilities: dict[str, Any] = {"tools": {"listChanged": True}, "logging": {}}
    if "promptsListChanged" in filters:
        capabilities["prompts"] = {"listChanged": True}
    if {"resourcesListChanged", "resourceSubscriptions"} & filters:
        capabilities["resources"] = {
            "listChanged": "resourcesListChanged" in filters,
            "subscribe": "resourceSubscriptions" in filters,
        }
    provided = feature_capabilities()
    for name, capability in provided.items():
        if name == "completions":
            capabilities[name] = {}
        else:
            capabilities.setdefault(name, capability.model_dump(by_alias=True, exclude_none=True))
    for name in _PROVIDED:
        if name not in provided:
            capabilities.pop(name, None)
    extensions = server_extensions("modern")
    if extensions:
        capabilities["extensions"] = extensions
    return capabilities
