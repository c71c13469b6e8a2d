"""The composition module: the MCP endpoint's method table assembled from the transport core and
the features built on top of it.

Layers, each importing only the ones below it:

1. the transport core (:mod:`mcp_oauth.mcp_server.transport`): HTTP front ends, eras, sessions, the table
   (:data:`mcp_oauth.mcp_server.transport.methods.methods`, with the lifecycle methods,
   ``server/discover`` and ``subscriptions/listen``), capability announcement
   (:mod:`mcp_oauth.mcp_server.transport.capabilities`);
2. the features: tools (:mod:`mcp_oauth.mcp_server.transport.tool_methods` serving a
   :class:`~mcp_oauth.mcp_server.tools.ToolRegistry`), resources, prompts and completion
   (:mod:`mcp_oauth.mcp_server.registry`), the Tasks extension (:mod:`mcp_oauth.mcp_server.mcp_tasks`),
   the Skills extension (:mod:`mcp_oauth.mcp_server.skills`);
3. this module, which registers the features' methods on the table, their capabilities with the
   transport, and the hooks the Tasks extension needs.

:func:`install` runs once from ``MCPOAuthConfig.ready()``; running it again is harmless.
"""

from __future__ import annotations

from typing import Any

from mcp_oauth.mcp_server.mcp_apps.resources import app_views
from mcp_oauth.mcp_server.mcp_apps.views import EXTENSION as APPS_EXTENSION
from mcp_oauth.mcp_server.mcp_apps.views import MIME_TYPE as APPS_MIME_TYPE
from mcp_oauth.mcp_server.mcp_tasks import methods as task_methods
from mcp_oauth.mcp_server.mcp_tasks.listen import listen_tasks
from mcp_oauth.mcp_server.registry.handlers import server_capabilities as registry_capabilities
from mcp_oauth.mcp_server.registry.methods import register_registry_methods
from mcp_oauth.mcp_server.registry.resources import active_resource_registry
from mcp_oauth.mcp_server.skills import catalog as skill_catalog
from mcp_oauth.mcp_server.skills import methods as skill_methods
from mcp_oauth.mcp_server.transport import capabilities, modern, tool_methods
from mcp_oauth.mcp_server.transport.extensions import register_extension
from mcp_oauth.mcp_server.transport.methods import methods
from mcp_oauth.mcp_server.transport.table import PRIVATE, MethodTable

__all__ = ["apps_extension", "install", "install_apps", "install_skills", "install_tasks", "install_tools"]


def install_tools(table: MethodTable) -> None:
    """``tools/list`` and ``tools/call`` (both eras) on ``table``."""
    table.register("tools/list", tool_methods.list_tools, cache=PRIVATE, replace=True)
    table.register("tools/call", tool_methods.call_tool, name_param="name", streams=True, replace=True)


def install_tasks(table: MethodTable) -> None:
    """The Tasks extension: ``tasks/get``, ``tasks/update``, ``tasks/cancel`` on ``table``, its
    ``tools/call`` hook (a ``CreateTaskResult`` for a task tool) and its ``subscriptions/listen``
    hook (task status notifications)."""
    task_methods.install(table)
    tool_methods.defer_to_task = task_methods.defer_to_task
    if listen_tasks not in modern.listen_hooks:
        modern.listen_hooks.append(listen_tasks)


def apps_extension() -> dict[str, Any] | None:
    """The MCP Apps extension's settings while the served resource registry holds a view
    (``{"mimeTypes": ["text/html;profile=mcp-app"]}``), else None (not announced)."""
    return {"mimeTypes": [APPS_MIME_TYPE]} if app_views(active_resource_registry()) else None


def install_apps() -> None:
    """Announce the MCP Apps extension (``io.modelcontextprotocol/ui``, both eras) while a tool has a
    view; the views themselves are ``ui://`` resources (``ui=`` of a tool)."""
    register_extension(APPS_EXTENSION, apps_extension)


def install_skills(table: MethodTable) -> None:
    """The Skills extension: ``skills/list``, ``skills/get``, ``resources/directory/read`` (both
    eras) on ``table``, the ``skill://`` template on the default resource registry, the extension
    announced while a skill is installed, and the receivers keeping that answer fresh."""
    skill_methods.install(table)
    skill_catalog.connect_receivers()


def install(table: MethodTable = methods) -> MethodTable:
    """Add every feature to ``table`` (default: the endpoint's): tools; resources, prompts and
    completion with their capabilities; the Tasks extension; the MCP Apps extension; the Skills
    extension. Returns ``table``."""
    install_tools(table)
    register_registry_methods(table)
    capabilities.register_provider(registry_capabilities)
    install_tasks(table)
    install_apps()
    install_skills(table)
    return table
