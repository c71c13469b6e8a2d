"""Registries of MCP server features beyond tools: resources, resource templates, prompts, completion.

* :mod:`.resources` — :class:`ResourceRegistry`, ``@resource``, ``@resource_template``
* :mod:`.items` — :class:`Resource`, :class:`ResourceTemplate` (what the registry holds)
* :mod:`.contents` — URI checks, reader return values -> ``contents``, sizes
* :mod:`.uritemplate` — RFC 6570 levels 1-2, expansion and matching
* :mod:`.models` — :class:`ModelResource` (a Django model as a resource template, FileField blobs)
* :mod:`.prompts` — :class:`PromptRegistry`, ``@prompt``
* :mod:`.completions` — ``completion/complete``
* :mod:`.notify` — subscriptions, ``updated`` / ``list_changed`` through session outboxes
* :mod:`.handlers` — the JSON-RPC handlers (transport-independent), :data:`~.handlers.HANDLERS`
* :mod:`.methods` — those handlers as entries of the endpoint's method table
* :mod:`.context` — :class:`RequestContext`, what readers, renderers and completers receive

Names importable from here are loaded lazily, so importing the package loads no model.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = [
    "InsufficientScope",
    "ModelResource",
    "Prompt",
    "PromptRegistry",
    "RequestContext",
    "Resource",
    "ResourceNotFound",
    "ResourceRegistry",
    "ResourceTemplate",
    "prompt",
    "resource",
    "resource_template",
]

_WHERE = {
    "InsufficientScope": ".errors",
    "ModelResource": ".models",
    "Prompt": ".prompts",
    "PromptRegistry": ".prompts",
    "prompt": ".prompts",
    "RequestContext": ".context",
    "Resource": ".items",
    "ResourceNotFound": ".contents",
    "ResourceRegistry": ".resources",
    "ResourceTemplate": ".items",
    "resource": ".resources",
    "resource_template": ".resources",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module, __name__), name)
