"""The registry's methods as entries of the endpoint's method table (:mod:`mcp_oauth.mcp_server.transport.methods`).

=============================  ============  ==========  ========  =====
method                         eras          Mcp-Name    cache     input
=============================  ============  ==========  ========  =====
``resources/list``             both                      private
``resources/templates/list``   both                      private
``resources/read``             both          ``uri``     private   input
``resources/subscribe``        2025-11-25
``resources/unsubscribe``      2025-11-25
``prompts/list``               both                      private
``prompts/get``                both          ``name``              input
``completion/complete``        both
=============================  ============  ==========  ========  =====

Methods marked *input* may ask the client (``ctx.request_inputs`` in a prompt renderer or resource
reader): on 2026-07-28 they answer ``resultType: "input_required"`` with a ``requestState``
sealed to the principal, the method, the prompt name or URI and a digest of the prompt arguments
(:func:`~mcp_oauth.mcp_server.transport.request_state.open_round`; a bad state on the retry is -32602);
on 2025-11-25 the response streams (ASGI) and the requests travel live on it.

Results are private: they depend on the token's scopes and the user's rows. A registry
:class:`~.errors.InsufficientScope` becomes the table's, naming every scope the operation needs
(the token's, the resource's and the item's), as for tools. On 2026-07-28, list changes and
resource updates reach ``subscriptions/listen`` streams (:mod:`.notify`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import InsufficientScope as ItemScopeMissing
from mcp_oauth.mcp_server.registry.handlers import handle
from mcp_oauth.mcp_server.transport import subscriptions
from mcp_oauth.mcp_server.transport.context import ToolContext
from mcp_oauth.mcp_server.transport.input_required import InputRequired
from mcp_oauth.mcp_server.transport.request_state import input_required_result, open_round
from mcp_oauth.mcp_server.transport.table import LEGACY, PRIVATE, Call, InsufficientScope, MethodTable

__all__ = ["register_registry_methods", "table_handler"]

#: Methods whose handlers may ask the client for input -> the params key naming the item.
INPUT_METHODS: dict[str, str] = {"prompts/get": "name", "resources/read": "uri"}

#: method -> table options.
ENTRIES: dict[str, dict[str, Any]] = {
    "resources/list": {"cache": PRIVATE},
    "resources/templates/list": {"cache": PRIVATE},
    "resources/read": {"cache": PRIVATE, "name_param": "uri", "streams": True},
    "resources/subscribe": {"eras": {LEGACY}},
    "resources/unsubscribe": {"eras": {LEGACY}},
    "prompts/list": {"cache": PRIVATE},
    "prompts/get": {"name_param": "name", "streams": True},
    "completion/complete": {},
}


def table_handler(method: str):
    """``async handler(call)`` serving ``method`` from the registries for a table :class:`Call`."""

    async def handler(call: Call) -> Any:
        input_round, requester = None, None
        binding: Mapping[str, Any] = {}
        if method in INPUT_METHODS and call.modern:
            arguments = call.params.get("arguments") if method == "prompts/get" else None
            input_round, binding = open_round(call, str(call.params.get(INPUT_METHODS[method])), arguments or {})
        elif method in INPUT_METHODS and call.sink is not None and call.session is not None:
            requester = _live_requester(call)
        ctx = RequestContext.for_call(call, input_round=input_round, requester=requester)
        try:
            return await handle(method, ctx, call.params)
        except InputRequired as needed:
            assert input_round is not None
            return input_required_result(binding, needed, input_round)
        except ItemScopeMissing as exc:
            principal = call.principal
            required = [*sorted(principal.scopes), *principal.resource.scope_list, *exc.required]
            raise InsufficientScope(f"The {exc.kind} {exc.name}", exc.missing, required) from None

    handler.__name__ = handler.__qualname__ = method.replace("/", "_")
    return handler


def _live_requester(call: Call):
    """``async (method, params, timeout) -> result``: a live server-to-client request on ``call``'s
    streamed 2025-11-25 response (the same machinery as a tool's ``ctx.send_request``)."""
    sender = ToolContext(
        principal=call.principal,
        session=call.session,
        request=call.http_request,
        request_id=call.message_id,
        protocol_version=call.protocol_version,
        sink=call.sink,
    )

    async def request(method: str, params: dict[str, Any] | None, timeout: float | None) -> dict[str, Any]:
        call.open_stream()
        return await sender.send_request(method, params, timeout=timeout)

    return request


def register_registry_methods(table: MethodTable) -> None:
    """Add the resource, prompt and completion methods to ``table``; let listen streams honour
    ``resourcesListChanged``, ``resourceSubscriptions`` and ``promptsListChanged``."""
    for method, options in ENTRIES.items():
        table.register(method, table_handler(method), replace=True, **options)
    subscriptions.supported_filters.update({"resourcesListChanged", "resourceSubscriptions", "promptsListChanged"})
