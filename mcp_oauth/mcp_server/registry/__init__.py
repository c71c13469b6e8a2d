"""Registries of MCP server features beyond tools: resources, resource templates, prompts, completion.

* :mod:`.resources` — :class:`ResourceRegistry`, ``@resource``, ``@resource_template``
* :mod:`.items` — :class:`Resource`, :class:`ResourceTemplate` (what the registry holds)
* :mod:`.contents` — URI checks, reader return values -> ``contents``, sizes
* :mod:`.uritemplate` — RFC 6570 levels 1-2, expansion and matching
* :mod:`.model_resources` — :class:`ModelResource` (a Django model as a resource template, FileField blobs)
* :mod:`.prompts` — :class:`PromptRegistry`, ``@prompt``
* :mod:`.completions` — ``completion/complete``
* :mod:`.notify` — subscriptions, ``updated`` / ``list_changed`` through session outboxes
* :mod:`.handlers` — the JSON-RPC handlers (transport-independent), :data:`~.handlers.HANDLERS`
* :mod:`.methods` — those handlers as entries of the endpoint's method table
* :mod:`.context` — :class:`RequestContext`, what readers, renderers and completers receive

Importing this package imports its registries and :class:`ModelResource` (and so this app's models):
do it from ``AppConfig.ready()`` or later (a ``resources.py`` / ``prompts.py`` found by autodiscovery is).
"""

from __future__ import annotations

from mcp_oauth.mcp_server.registry.contents import ResourceNotFound
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import InsufficientScope
from mcp_oauth.mcp_server.registry.items import Resource, ResourceTemplate
from mcp_oauth.mcp_server.registry.model_resources import ModelResource
from mcp_oauth.mcp_server.registry.prompts import Prompt, PromptRegistry, prompt
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry, resource, resource_template

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
