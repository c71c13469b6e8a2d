"""``completion/complete`` (MCP 2025-11-25 / 2026-07-28 "Utilities / Completion").

A completion request names a prompt (``ref/prompt``) or a resource template
(``ref/resource`` with the template string as ``uri``) and one argument. The
completer registered for that argument is called as ``fn(ctx, value)`` with
``ctx.arguments`` = the request's ``context.arguments`` (earlier choices), sync or
async. It returns a list of strings, an ``mcp_types.Completion`` or a dict of its
fields; at most :data:`MAX_VALUES` values are sent, with ``total`` and ``hasMore``
telling the client there are more. An argument without a completer gets no
values (the spec's "no suggestions"), an unknown prompt or template ``-32602``.
``argument.value`` and every ``context.arguments`` value are at most
:data:`MAX_ARGUMENT_LENGTH` characters (else ``-32602`` naming the field and the limit):
what a person types into a completion box is short, and an unbounded value
would reach the completer's database query (SQLite refuses ``LIKE`` patterns over
50,000 bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.prompts import PromptRegistry
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry
from mcp_oauth.mcp_server.transport.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, McpError

__all__ = ["MAX_ARGUMENT_LENGTH", "MAX_VALUES", "complete", "to_completion"]

#: The longest ``argument.value`` (and ``context.arguments`` value) accepted, in characters.
MAX_ARGUMENT_LENGTH = 1000

#: The spec's cap on ``completion.values`` ("Must not exceed 100 items").
MAX_VALUES = 100


def to_completion(value: Any) -> types.Completion:
    """A completer's return value as a ``Completion`` (values capped at :data:`MAX_VALUES`).

    :raises TypeError: not a list of strings, a ``Completion`` or a dict of one.
    """
    if isinstance(value, Mapping):
        value = types.Completion.model_validate(dict(value))
    if isinstance(value, types.Completion):
        values = list(value.values)
        total = value.total if value.total is not None else len(values)
        has_more = bool(value.has_more) or len(values) > MAX_VALUES
        return types.Completion(values=values[:MAX_VALUES], total=total, has_more=has_more)
    if value is None:
        value = []
    if isinstance(value, (str, bytes)):
        raise TypeError("a completer must return a list of strings")
    values = list(value)
    if not all(isinstance(item, str) for item in values):
        raise TypeError("a completer must return a list of strings")
    return types.Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)


def _check_length(field: str, value: Any) -> None:
    if isinstance(value, str) and len(value) > MAX_ARGUMENT_LENGTH:
        raise McpError(
            INVALID_PARAMS,
            f"Invalid params for completion/complete: {field} must be at most {MAX_ARGUMENT_LENGTH} characters",
            {"errors": [{"field": field, "message": f"at most {MAX_ARGUMENT_LENGTH} characters"}]},
        )


async def complete(
    ctx: RequestContext,
    params: types.CompleteRequestParams,
    resources: ResourceRegistry,
    prompts: PromptRegistry,
) -> types.CompleteResult:
    """Serve ``completion/complete``.

    :raises McpError: -32602 for an unknown prompt or template, an argument it
        does not declare, or a value over :data:`MAX_ARGUMENT_LENGTH`; -32603 when the completer returns something unusable.
    :raises InsufficientScope: the prompt or template needs scopes the token lacks.
    """
    ref = params.ref
    argument = params.argument
    earlier = dict(params.context.arguments or {}) if params.context is not None else {}
    _check_length("argument.value", argument.value)
    for name, earlier_value in earlier.items():
        _check_length(f"context.arguments.{name[:100]}", earlier_value)
    call_ctx = ctx.with_arguments(earlier)
    if isinstance(ref, types.PromptReference):
        item = prompts.find(ctx, ref.name)
        if argument.name not in {a.name for a in item.arguments}:
            raise McpError(
                INVALID_PARAMS,
                f"Unknown argument for prompt {item.name!r}: {argument.name[:100]}",
                {"prompt": item.name, "argument": argument.name[:100]},
            )
        value = await item.complete(call_ctx, argument.name, argument.value)
        what = f"prompt {item.name!r}"
    else:
        template = resources.get_template(ref.uri)
        if template is None:
            raise McpError(INVALID_PARAMS, f"Unknown resource template: {ref.uri[:200]}", {"uri": ref.uri[:200]})
        template.require_scopes(ctx, template.template)
        assert template.uri_template is not None
        if argument.name not in template.uri_template.variables:
            raise McpError(
                INVALID_PARAMS,
                f"Unknown variable for resource template {template.template!r}: {argument.name[:100]}",
                {"uri": template.template, "argument": argument.name[:100]},
            )
        value = await template.complete(call_ctx, argument.name, argument.value)
        what = f"resource template {template.template!r}"
    try:
        completion = to_completion(value)
    except (TypeError, ValueError):
        raise McpError(INTERNAL_ERROR, f"The completer of {what} returned an invalid value") from None
    return types.CompleteResult(completion=completion)
