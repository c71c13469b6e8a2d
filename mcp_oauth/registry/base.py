"""Shared helpers of the registries: scopes, calling sync or async callables, the context parameter."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, get_type_hints

from asgiref.sync import iscoroutinefunction, sync_to_async

from .. import scopes as scope_hierarchy
from .context import RequestContext

__all__ = ["call", "context_parameter", "missing_scopes", "scope_tuple"]

_SCOPE_RE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 §3.3 scope-token


def scope_tuple(scopes: Iterable[str] | str, what: str) -> tuple[str, ...]:
    """``scopes`` as a de-duplicated tuple. :raises ValueError: a malformed scope (RFC 6749 §3.3)."""
    items = tuple(dict.fromkeys(scopes.split() if isinstance(scopes, str) else scopes))
    for scope in items:
        if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
            raise ValueError(f"{what}: invalid scope {scope!r}")
    return items


def missing_scopes(required: Iterable[str], granted: Iterable[str]) -> list[str]:
    """The scopes of ``required`` that ``granted`` does not grant, in order, honouring
    ``SCOPE_HIERARCHY`` (:func:`mcp_oauth.scopes.missing`)."""
    return scope_hierarchy.missing(granted, required)


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The parameter that receives the :class:`RequestContext`: one annotated with it, else a first one named ``ctx``."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        hints = get_type_hints(fn)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to the name
        hints = {}
    parameters = list(signature.parameters.values())
    for parameter in parameters:
        hint = hints.get(parameter.name)
        if isinstance(hint, type) and issubclass(hint, RequestContext):
            return parameter.name
    if parameters and parameters[0].name == "ctx":
        return "ctx"
    return None


async def call(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` (sync in a worker thread, thread-sensitive like Django views; async awaited)."""
    if iscoroutinefunction(fn):
        return await fn(*args, **kwargs)
    result = await sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
    if inspect.isawaitable(result):
        return await result
    return result
