"""The registry's methods as entries of the endpoint's method table (:mod:`mcp_oauth.transport.handlers`).

=============================  ============  ==========  ========
method                         eras          Mcp-Name    cache
=============================  ============  ==========  ========
``resources/list``             both                      private
``resources/templates/list``   both                      private
``resources/read``             both          ``uri``     private
``resources/subscribe``        2025-11-25
``resources/unsubscribe``      2025-11-25
``prompts/list``               both                      private
``prompts/get``                both          ``name``
``completion/complete``        both
=============================  ============  ==========  ========

Results are private: they depend on the token's scopes and the user's rows. A registry
:class:`~.errors.InsufficientScope` becomes the table's, naming every scope the operation needs
(the token's, the resource's and the item's), as for tools. On 2026-07-28, list changes and
resource updates reach ``subscriptions/listen`` streams (:mod:`.notify`).
"""

from __future__ import annotations

from typing import Any

from ..transport import subscriptions
from ..transport.table import LEGACY, PRIVATE, Call, InsufficientScope, MethodTable
from .context import RequestContext
from .errors import InsufficientScope as ItemScopeMissing
from .handlers import handle

__all__ = ["register_registry_methods", "table_handler"]

#: method -> table options.
ENTRIES: dict[str, dict[str, Any]] = {
    "resources/list": {"cache": PRIVATE},
    "resources/templates/list": {"cache": PRIVATE},
    "resources/read": {"cache": PRIVATE, "name_param": "uri"},
    "resources/subscribe": {"eras": {LEGACY}},
    "resources/unsubscribe": {"eras": {LEGACY}},
    "prompts/list": {"cache": PRIVATE},
    "prompts/get": {"name_param": "name"},
    "completion/complete": {},
}


def table_handler(method: str):
    """``async handler(call)`` serving ``method`` from the registries for a table :class:`Call`."""

    async def handler(call: Call) -> dict[str, Any]:
        ctx = RequestContext.for_principal(
            call.principal,
            request=call.http_request,
            session=call.session,
            protocol_version=call.protocol_version,
            method=call.method,
        )
        try:
            return await handle(method, ctx, call.params)
        except ItemScopeMissing as exc:
            principal = call.principal
            required = [*sorted(principal.scopes), *principal.resource.scope_list, *exc.required]
            raise InsufficientScope(f"The {exc.kind} {exc.name}", exc.missing, required) from None

    handler.__name__ = handler.__qualname__ = method.replace("/", "_")
    return handler


def register_registry_methods(table: MethodTable) -> None:
    """Add the resource, prompt and completion methods to ``table``; let listen streams honour
    ``resourcesListChanged``, ``resourceSubscriptions`` and ``promptsListChanged``."""
    for method, options in ENTRIES.items():
        table.register(method, table_handler(method), **options)
    subscriptions.supported_filters.update({"resourcesListChanged", "resourceSubscriptions", "promptsListChanged"})
