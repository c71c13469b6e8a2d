"""JSON-RPC handlers of the resource, prompt and completion methods, independent of the transport.

Each handler is ``async fn(ctx: RequestContext, params: dict) -> dict`` returning the
result in ``ctx.protocol_version``'s wire shape, or raising
:class:`~mcp_oauth.mcp_server.transport.jsonrpc.McpError` (JSON-RPC error) or
:class:`~mcp_oauth.mcp_server.registry.errors.InsufficientScope` (HTTP 403 step-up):

==============================  ========================================================
method                          result
==============================  ========================================================
``resources/list``              ``ListResourcesResult``: a page (``RESOURCE_PAGE_SIZE``)
                                of what the token may use, ``nextCursor`` opaque and signed
``resources/templates/list``    ``ListResourceTemplatesResult`` (one page)
``resources/read``              ``ReadResourceResult``
``resources/subscribe``         ``{}`` (2025-11-25 sessions only)
``resources/unsubscribe``       ``{}`` (2025-11-25 sessions only)
``prompts/list``                ``ListPromptsResult`` (one page)
``prompts/get``                 ``GetPromptResult``
``completion/complete``         ``CompleteResult``
==============================  ========================================================

:data:`HANDLERS` maps the method names to the handlers; :func:`server_capabilities`
gives the ``resources`` / ``prompts`` / ``completions`` capabilities to announce.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.core import signing
from mcp_types import methods as mcp_methods
from pydantic import ValidationError

from mcp_oauth.mcp_server.registry.completions import complete
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import InsufficientScope
from mcp_oauth.mcp_server.registry.notify import subscribe, unsubscribe
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry, active_resource_registry
from mcp_oauth.mcp_server.transport.input_required import InputRequired
from mcp_oauth.mcp_server.transport.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, McpError
from mcp_oauth.resource_server.authentication import PrincipalGone
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "HANDLERS",
    "handle",
    "get_prompt_registry",
    "get_resource_registry",
    "server_capabilities",
]

logger = logging.getLogger("mcp_oauth.registry")

Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]

_CURSOR_SALT = "mcp_oauth.registry.cursor"
#: Protocol versions whose wire format mcp_types knows; an unknown one is served as the latest 2025 one.
_FALLBACK_VERSION = "2025-11-25"


def get_resource_registry() -> ResourceRegistry:
    """The registry named by ``MCP_OAUTH["RESOURCE_REGISTRY"]`` (an instance or its dotted path)."""
    return active_resource_registry()


def get_prompt_registry() -> PromptRegistry:
    """The registry named by ``MCP_OAUTH["PROMPT_REGISTRY"]`` (an instance or its dotted path,
    imported once by the settings object)."""
    return mcp_oauth_settings.PROMPT_REGISTRY


def server_capabilities() -> dict[str, Any]:
    """``ServerCapabilities`` fields for the registries that have something to serve."""
    capabilities: dict[str, Any] = {}
    resources = get_resource_registry()
    prompts = get_prompt_registry()
    has_resources = resources.offers_anything()
    if has_resources:
        capabilities["resources"] = types.ResourcesCapability(subscribe=True, list_changed=True)
    if len(prompts):
        capabilities["prompts"] = types.PromptsCapability(list_changed=True)
    if has_resources or len(prompts):
        capabilities["completions"] = types.CompletionsCapability()
    return capabilities


def _version(ctx: RequestContext) -> str:
    return ctx.protocol_version or _FALLBACK_VERSION


def _invalid(method: str, exc: ValidationError) -> McpError:
    fields = []
    for error in exc.errors(include_url=False, include_context=False, include_input=False)[:20]:
        loc = [part for part in error["loc"] if part != "params"]
        fields.append({"field": ".".join(str(p) for p in loc) or "params", "message": error["msg"]})
    listed = "; ".join(f"{f['field']}: {f['message']}" for f in fields)
    return McpError(INVALID_PARAMS, f"Invalid params for {method}: {listed}", {"errors": fields})


def parse(method: str, ctx: RequestContext, params: dict[str, Any]) -> Any:
    """The validated ``params`` model of ``method``. :raises McpError: -32602 / -32601."""
    try:
        request = mcp_methods.parse_client_request(method, _version(ctx), params)
    except ValidationError as exc:
        raise _invalid(method, exc) from None
    except (KeyError, ValueError):
        raise McpError(-32601, f"Method not found: {method} (not in protocol {_version(ctx)})") from None
    return request.params


def serialize(method: str, ctx: RequestContext, result: types.Result) -> dict[str, Any]:
    """``result`` as a wire dict, without the 2026-07-28 envelope fields (``resultType``, ``ttlMs``,
    ``cacheScope``): the method table adds those for modern requests and validates the result for
    the call's protocol version."""
    dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    for key in ("resultType", "ttlMs", "cacheScope"):
        dumped.pop(key, None)
    return dumped


def _offset(method: str, params: Any) -> int:
    cursor = getattr(params, "cursor", None) if params is not None else None
    if cursor is None:
        return 0
    try:
        data = signing.loads(cursor, salt=_CURSOR_SALT)
    except signing.BadSignature:
        raise McpError(INVALID_PARAMS, f"Invalid params for {method}: unknown cursor") from None
    if not isinstance(data, dict) or data.get("m") != method or not isinstance(data.get("o"), int) or data["o"] < 0:
        raise McpError(INVALID_PARAMS, f"Invalid params for {method}: unknown cursor")
    return data["o"]


def _cursor(method: str, offset: int | None) -> str | None:
    return None if offset is None else signing.dumps({"m": method, "o": offset}, salt=_CURSOR_SALT, compress=True)


def _no_cursor(method: str, params: Any) -> None:
    if params is not None and getattr(params, "cursor", None) is not None:
        raise McpError(INVALID_PARAMS, f"Invalid params for {method}: unknown cursor")


# --- resources -------------------------------------------------------------------------------


async def resources_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``resources/list``: static resources, then the rows of listing templates, paginated."""
    parsed = parse("resources/list", ctx, params)
    offset = _offset("resources/list", parsed)
    limit = max(1, int(mcp_oauth_settings.RESOURCE_PAGE_SIZE))
    entries, next_offset = await get_resource_registry().list_page(ctx, offset, limit)
    result = types.ListResourcesResult(resources=entries, next_cursor=_cursor("resources/list", next_offset))
    return serialize("resources/list", ctx, result)


async def resources_templates_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``resources/templates/list``: the templates the token may use (one page)."""
    parsed = parse("resources/templates/list", ctx, params)
    _no_cursor("resources/templates/list", parsed)
    templates = [template.definition() for template in get_resource_registry().visible_templates(ctx)]
    return serialize("resources/templates/list", ctx, types.ListResourceTemplatesResult(resource_templates=templates))


async def resources_read(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``resources/read``."""
    parsed = parse("resources/read", ctx, params)
    contents = await get_resource_registry().read(ctx, parsed.uri)
    return serialize("resources/read", ctx, types.ReadResourceResult(contents=contents))


def _require_session(ctx: RequestContext, method: str) -> Any:
    if ctx.session is None:
        raise McpError(INVALID_REQUEST, f"{method} needs a 2025-11-25 session; on 2026-07-28 use subscriptions/listen")
    return ctx.session


async def resources_subscribe(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``resources/subscribe``: the URI must be readable by this user now (else "Resource not found")."""
    parsed = parse("resources/subscribe", ctx, params)
    session = _require_session(ctx, "resources/subscribe")
    uri = await get_resource_registry().readable(ctx, parsed.uri)
    await sync_to_async(subscribe)(session, uri)
    return {}


async def resources_unsubscribe(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``resources/unsubscribe``: ``{}`` whether or not the session was subscribed."""
    parsed = parse("resources/unsubscribe", ctx, params)
    session = _require_session(ctx, "resources/unsubscribe")
    await sync_to_async(unsubscribe)(session, parsed.uri)
    return {}


# --- prompts and completion -----------------------------------------------------------------


async def prompts_list(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``prompts/list``: the prompts the token may use (one page)."""
    parsed = parse("prompts/list", ctx, params)
    _no_cursor("prompts/list", parsed)
    prompts = [item.definition() for item in get_prompt_registry().visible(ctx)]
    return serialize("prompts/list", ctx, types.ListPromptsResult(prompts=prompts))


async def prompts_get(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``prompts/get``."""
    parsed = parse("prompts/get", ctx, params)
    item = get_prompt_registry().find(ctx, parsed.name)
    try:
        result = await item.render(ctx, parsed.arguments)
    except (TypeError, ValidationError):
        logger.exception("prompt %r returned something that is not a message", item.name)
        raise McpError(INTERNAL_ERROR, f"The prompt {item.name!r} produced an invalid result") from None
    return serialize("prompts/get", ctx, result)


async def completion_complete(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """``completion/complete``."""
    parsed = parse("completion/complete", ctx, params)
    result = await complete(ctx, parsed, get_resource_registry(), get_prompt_registry())
    return serialize("completion/complete", ctx, result)


#: Method -> handler.
HANDLERS: dict[str, Handler] = {
    "resources/list": resources_list,
    "resources/templates/list": resources_templates_list,
    "resources/read": resources_read,
    "resources/subscribe": resources_subscribe,
    "resources/unsubscribe": resources_unsubscribe,
    "prompts/list": prompts_list,
    "prompts/get": prompts_get,
    "completion/complete": completion_complete,
}


async def handle(method: str, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    """Run the handler of ``method``; an unexpected exception of a registered callable becomes -32603.

    :raises McpError | InsufficientScope: as the handlers.
    :raises KeyError: ``method`` is not one of :data:`HANDLERS`.
    """
    handler = HANDLERS[method]
    try:
        return await handler(ctx, params)
    except (McpError, InsufficientScope, InputRequired, PrincipalGone):
        raise
    except Exception:
        logger.exception("%s failed", method)
        raise McpError(INTERNAL_ERROR, f"Internal error while serving {method}") from None
