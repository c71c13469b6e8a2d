"""What every registry shares (tools, prompts, resources): names, scopes, registration and change
notification, calling sync or async callables, finding the context parameter.

* :class:`ChangeNotifier` — ``on_change`` listeners and the ``list_changed`` publication of a
  registration change (2026-07-28 ``subscriptions/listen`` streams);
* :class:`NamedRegistry` — a registry of items keyed by a name (``register``/``unregister``/
  ``get``/``list``, the decorator form), the base of :class:`~mcp_oauth.mcp_server.tools.ToolRegistry` and
  :class:`~mcp_oauth.mcp_server.registry.prompts.PromptRegistry`;
* :func:`scope_tuple` / :func:`missing_scopes` — an item's scopes, checked against a token's;
* :func:`call` — a sync callable in a worker thread (thread-sensitive, like Django views), an async
  one awaited;
* :func:`context_parameter` — the parameter that receives the context (a ``ToolContext`` for a
  tool, a :class:`RequestContext` for a reader, renderer or completer).
"""

from __future__ import annotations

import builtins
import inspect
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar, get_type_hints

from asgiref.sync import iscoroutinefunction, sync_to_async

from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.transport.subscriptions import publish_list_changed
from mcp_oauth.shared import scopes as scope_hierarchy

__all__ = [
    "NAME_RE",
    "ChangeNotifier",
    "NamedRegistry",
    "call",
    "context_parameter",
    "missing_scopes",
    "scope_tuple",
]

_SCOPE_RE = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")  # RFC 6749 §3.3 scope-token

#: Tool and prompt names: MCP 2025-11-25 "Tool Names" (SEP-986), 1-128 of ``A-Z a-z 0-9 _ - .``.
NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")

ItemT = TypeVar("ItemT")


def scope_tuple(scopes: Iterable[str] | str, what: str) -> tuple[str, ...]:
    """``scopes`` as a de-duplicated tuple. :raises ValueError: a malformed scope (RFC 6749 §3.3)."""
    items = tuple(dict.fromkeys(scopes.split() if isinstance(scopes, str) else scopes))
    for scope in items:
        if not isinstance(scope, str) or not _SCOPE_RE.match(scope):
            raise ValueError(f"{what}: invalid scope {scope!r}")
    return items


def missing_scopes(required: Iterable[str], granted: Iterable[str]) -> list[str]:
    """The scopes of ``required`` that ``granted`` does not grant, in order, honouring
    ``SCOPE_HIERARCHY`` (:func:`mcp_oauth.shared.scopes.missing`)."""
    return scope_hierarchy.missing(granted, required)


def context_parameter(fn: Callable[..., Any], context_type: type = RequestContext) -> str | None:
    """The parameter that receives the context: one annotated with ``context_type`` (or a
    subclass), else a first one named ``ctx``."""
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
        if isinstance(hint, type) and issubclass(hint, context_type):
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


class ChangeNotifier:
    """Registration changes of a registry: ``on_change`` listeners, and ``list_changed`` for
    ``list_kind`` (``"tools"``, ``"prompts"``, ``"resources"``) published to listen streams."""

    #: The ``notifications/<list_kind>/list_changed`` a registration change publishes.
    list_kind: str = ""

    def __init__(self) -> None:
        self._listeners: builtins.list[Callable[[], None]] = []

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every registration change (list_changed notifications)."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        """After a registration change: 2026-07-28 listen streams that opted in learn of it (no
        database; legacy sessions get ``notify_list_changed`` from the caller)."""
        publish_list_changed(self.list_kind)
        for listener in builtins.list(self._listeners):
            listener()


class NamedRegistry(ChangeNotifier, Generic[ItemT]):
    """Items keyed by name, in registration order. A subclass sets :attr:`kind` (``"tool"``,
    ``"prompt"``) and :attr:`list_kind`, and builds its items in ``register``."""

    #: What an item is called in messages.
    kind: str = "item"

    def __init__(self, name: str = "default") -> None:
        super().__init__()
        self.name = name
        self._items: dict[str, ItemT] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}: {len(self._items)} {self.list_kind or 'items'}>"

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[ItemT]:
        return iter(builtins.list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def get(self, name: object) -> ItemT | None:
        """The item called ``name``, or None."""
        return self._items.get(name) if isinstance(name, str) else None

    def list(self) -> builtins.list[ItemT]:  # the registry's vocabulary
        """Every item, in registration order."""
        return builtins.list(self._items.values())

    def unregister(self, name: str) -> ItemT:
        """Remove and return the item ``name`` (listen streams get ``list_changed``).

        :raises KeyError: no such item.
        """
        item = self._items.pop(name)
        self._changed()
        return item

    def _item_name(self, fn: Callable[..., Any], name: str | None) -> str:
        """The name ``fn`` registers under (``name``, else its ``__name__``).

        :raises ValueError: not callable, an invalid name, or one already registered.
        """
        if not callable(fn):
            raise ValueError(f"a {self.kind} must be callable")
        item_name = name or getattr(fn, "__name__", None)
        if not isinstance(item_name, str) or not NAME_RE.match(item_name):
            raise ValueError(f"invalid {self.kind} name {item_name!r}: 1-128 characters of A-Z a-z 0-9 _ - .")
        if item_name in self._items:
            raise ValueError(f"a {self.kind} named {item_name!r} is already registered in {self!r}")
        return item_name

    def _add(self, name: str, item: ItemT) -> ItemT:
        self._items[name] = item
        self._changed()
        return item

    def register(self, fn: Callable[..., Any], **options: Any) -> ItemT:  # pragma: no cover - abstract
        raise NotImplementedError

    def _decorate(self, fn: Callable[..., Any] | None, options: dict[str, Any]) -> Any:
        """``@registry.x`` or ``@registry.x(**options)``: :meth:`register`, the function returned unchanged."""
        if fn is not None:
            self.register(fn, **options)
            return fn

        def decorator(func: Callable[..., Any]) -> Callable[..., Any]:
            self.register(func, **options)
            return func

        return decorator
