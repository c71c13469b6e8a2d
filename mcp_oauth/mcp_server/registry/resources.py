"""The resource registry (MCP 2025-11-25 / 2026-07-28 "Server Features / Resources").

Register readers on the default :data:`registry`, typically in an app's
``mcp_resources.py`` (autodiscovered at start-up like ``mcp_tools.py``)::

    from mcp_oauth.mcp_server.registry import RequestContext, resource, resource_template

    @resource("demo://readme", name="readme", mime_type="text/markdown")
    def readme(ctx: RequestContext) -> str:
        return "# Hello"

    @resource_template("reports://{year}/{+name}", name="report", mime_type="application/pdf",
                       scopes=["reports"], completers={"year": lambda ctx, value: ["2025", "2026"]})
    async def report(ctx, year: int, name: str) -> bytes:
        ...

* A **static resource** has one URI; a **template** an RFC 6570 level 1-2 URI
  template whose variables become the reader's keyword arguments, converted to the
  parameter's annotation (``int``, ``uuid.UUID``, ``datetime.date``, … with
  pydantic's string validation). A value that fails its type answers ``-32602``
  naming the parameter.
* **Return values** become ``contents``: ``str`` -> one text entry; ``bytes`` -> one
  ``blob`` (base64) entry; a dict or list -> JSON text (``application/json``); an
  ``mcp_types.TextResourceContents`` / ``BlobResourceContents`` or a list of them
  pass through. ``None`` (or :class:`ResourceNotFound`) -> ``-32602`` "Resource not
  found", the same answer as for a URI that does not exist.
* **Scopes**: an item needs ``scopes`` beyond the resource's; lists show only the
  items the token may use; reading one with a token that lacks them raises
  :class:`~mcp_oauth.mcp_server.registry.errors.InsufficientScope` (HTTP 403 step-up).
* **Size**: text (UTF-8) or binary content over ``max_bytes`` (default
  ``MCP_OAUTH["RESOURCE_MAX_BYTES"]``) answers ``-32602`` "Resource too large".
* A template may offer ``lister(ctx)``: an iterable (a QuerySet is sliced in the
  database) of ``mcp_types.Resource``, dicts, or objects its ``describe(obj)``
  turns into ``Resource`` entries, shown by ``resources/list`` after the static
  resources; and ``completers`` for ``completion/complete`` of its variables.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import mcp_types as types

from mcp_oauth.mcp_server.registry.base import ChangeNotifier, context_parameter, scope_tuple
from mcp_oauth.mcp_server.registry.contents import (
    Contents,
    ResourceNotFound,
    _annotations,
    _icons,
    check_uri,
    to_contents,
)
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import resource_not_found
from mcp_oauth.mcp_server.registry.items import Resource, ResourceTemplate, template_adapters
from mcp_oauth.mcp_server.registry.uritemplate import InvalidTemplate, UriTemplate
from mcp_oauth.mcp_server.transport.jsonrpc import McpError
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "Contents",
    "Resource",
    "ResourceNotFound",
    "ResourceRegistry",
    "ResourceTemplate",
    "active_resource_registry",
    "check_uri",
    "registry",
    "resource",
    "resource_template",
    "to_contents",
]

_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")


class ResourceRegistry(ChangeNotifier):
    """A named set of static resources and templates. The endpoint serves the one named by
    ``MCP_OAUTH["RESOURCE_REGISTRY"]`` (default :data:`registry`).

    Lookup order for ``resources/read``: the static resource with exactly that URI,
    then each template in registration order; the first template that matches wins.
    """

    list_kind = "resources"

    def __init__(self, name: str = "default") -> None:
        super().__init__()
        self.name = name
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}

    def __repr__(self) -> str:
        return f"<ResourceRegistry {self.name!r}: {len(self._resources)} resources, {len(self._templates)} templates>"

    def __len__(self) -> int:
        return len(self._resources) + len(self._templates)

    # --- contents ---------------------------------------------------------------------

    def resources(self) -> list[Resource]:
        """Every static resource, in registration order."""
        return list(self._resources.values())

    def templates(self) -> list[ResourceTemplate]:
        """Every template, in registration order."""
        return list(self._templates.values())

    def get_resource(self, uri: str) -> Resource | None:
        return self._resources.get(uri)

    def get_template(self, uri_template: str) -> ResourceTemplate | None:
        """The template registered with exactly this template string (``ref/resource`` of completion)."""
        return self._templates.get(uri_template)

    def resolve(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The item serving ``uri`` and its raw (string) variables, or None."""
        found = self._resources.get(uri)
        if found is not None:
            return found, {}
        for template in self._templates.values():
            raw = template.match(uri)
            if raw is not None:
                return template, raw
        return None

    def unregister(self, key: str) -> Resource | ResourceTemplate:
        """Remove the static resource with URI ``key`` or the template with template string ``key``.

        :raises KeyError: nothing registered under ``key``.
        """
        item = self._resources.pop(key, None) or self._templates.pop(key)
        self._changed()
        return item

    # --- registration -----------------------------------------------------------------

    def add(self, item: Resource | ResourceTemplate) -> Resource | ResourceTemplate:
        """Register a ready-made item (e.g. a :class:`~mcp_oauth.mcp_server.registry.model_resources.ModelResource`).

        :raises ValueError: its URI or template is already registered.
        """
        if isinstance(item, ResourceTemplate):
            if item.template in self._templates:
                raise ValueError(f"a resource template {item.template!r} is already registered in {self!r}")
            self._templates[item.template] = item
        else:
            if item.uri in self._resources:
                raise ValueError(f"a resource {item.uri!r} is already registered in {self!r}")
            self._resources[item.uri] = item
        connect = getattr(item, "connect", None)
        if callable(connect):
            connect(self)
        self._changed()
        return item

    def register_resource(
        self,
        fn: Callable[..., Any],
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        scopes: Iterable[str] | str = (),
        annotations: types.Annotations | Mapping[str, Any] | None = None,
        icons: Iterable[types.Icon | Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        max_bytes: int | None = None,
    ) -> Resource:
        """Register ``fn`` as the reader of the static resource ``uri``.

        :raises ValueError: malformed or duplicate URI, a template (use
            :meth:`register_template`), a malformed scope or name.
        """
        if not callable(fn):
            raise ValueError("a resource reader must be callable")
        try:
            check_uri(uri)
        except McpError:
            raise ValueError(f"invalid resource URI {uri!r}: an absolute URI without whitespace") from None
        if "{" in uri:
            raise ValueError(f"{uri!r} is a URI template: register it with resource_template()")
        item_name = name or getattr(fn, "__name__", None) or uri
        if not _NAME_RE.match(item_name):
            raise ValueError(f"invalid resource name {item_name!r}")
        item = Resource(
            name=item_name,
            title=title,
            description=description if description is not None else inspect.getdoc(fn),
            mime_type=mime_type,
            scopes=scope_tuple(scopes, f"resource {uri!r}"),
            annotations=_annotations(annotations),
            icons=_icons(icons),
            meta=meta,
            max_bytes=max_bytes,
            uri=uri,
            fn=fn,
            size=size,
            context_param=context_parameter(fn),
        )
        self.add(item)
        return item

    def register_template(
        self,
        fn: Callable[..., Any],
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        scopes: Iterable[str] | str = (),
        annotations: types.Annotations | Mapping[str, Any] | None = None,
        icons: Iterable[types.Icon | Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        max_bytes: int | None = None,
        lister: Callable[..., Any] | None = None,
        describe: Callable[[Any], Any] | None = None,
        completers: Mapping[str, Callable[..., Any]] | None = None,
    ) -> ResourceTemplate:
        """Register ``fn(ctx, **variables)`` as the reader of ``uri_template``.

        :raises ValueError: not an RFC 6570 level 1-2 template, a variable without a
            reader parameter, an unresolvable annotation, a completer for an unknown
            variable, a duplicate template.
        """
        if not callable(fn):
            raise ValueError("a resource reader must be callable")
        try:
            parsed = UriTemplate(uri_template)
        except InvalidTemplate as exc:
            raise ValueError(str(exc)) from None
        if parsed.is_literal:
            raise ValueError(f"{uri_template!r} has no variable: register it with resource()")
        what = f"resource template {uri_template!r}"
        adapters, type_names = template_adapters(fn, parsed.variables, what)
        completer_map = dict(completers or {})
        for variable in completer_map:
            if variable not in parsed.variables:
                raise ValueError(f"{what}: completer for unknown variable {variable!r}")
        item_name = name or getattr(fn, "__name__", None) or uri_template
        if not _NAME_RE.match(item_name):
            raise ValueError(f"invalid resource template name {item_name!r}")
        item = ResourceTemplate(
            name=item_name,
            title=title,
            description=description if description is not None else inspect.getdoc(fn),
            mime_type=mime_type,
            scopes=scope_tuple(scopes, what),
            annotations=_annotations(annotations),
            icons=_icons(icons),
            meta=meta,
            max_bytes=max_bytes,
            uri_template=parsed,
            fn=fn,
            lister=lister,
            describe=describe,
            completers=completer_map,
            context_param=context_parameter(fn),
            adapters=adapters,
            type_names=type_names,
        )
        self.add(item)
        return item

    def resource(self, uri: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator of :meth:`register_resource`; returns the function unchanged."""

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register_resource(fn, uri, **options)
            return fn

        return decorator

    def resource_template(
        self, uri_template: str, **options: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator of :meth:`register_template`; returns the function unchanged."""

        def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register_template(fn, uri_template, **options)
            return fn

        return decorator

    # --- serving ----------------------------------------------------------------------

    async def list_page(self, ctx: RequestContext, offset: int, limit: int) -> tuple[list[types.Resource], int | None]:
        """``limit`` entries from ``offset`` of what ``ctx`` may list, and the next offset (None at the end)."""
        entries: list[types.Resource] = [
            item.definition()
            for item in [item for item in self._resources.values() if item.allowed(ctx)][offset : offset + limit]
        ]
        position = sum(1 for item in self._resources.values() if item.allowed(ctx))  # start of the next source
        for template in self._templates.values():
            next_offset = offset + len(entries)
            if len(entries) >= limit and position > next_offset:
                break  # the page is full and something is left: that is all we need to know
            if template.lister is None or not template.allowed(ctx):
                continue
            start = max(0, next_offset - position)
            page, total = await template.list_entries(ctx, start, start + max(0, limit - len(entries)))
            entries.extend(page)
            position += total
        next_offset = offset + len(entries)
        return entries, (next_offset if next_offset < position else None)

    def visible_templates(self, ctx: RequestContext) -> list[ResourceTemplate]:
        return [template for template in self._templates.values() if template.allowed(ctx) and template.offered()]

    def offers_anything(self) -> bool:
        """Whether some resource or template has something to serve (:meth:`~.items.Resource.offered`)."""
        return any(item.offered() for item in self)

    async def locate(self, ctx: RequestContext, uri: object) -> tuple[Resource | ResourceTemplate, str, dict[str, Any]]:
        """Resolve ``uri`` for reading or subscribing: the item, the URI and converted variables.

        :raises McpError: malformed URI, unknown URI, a variable failing its type.
        :raises InsufficientScope: the item needs scopes the token lacks.
        """
        checked = check_uri(uri)
        found = self.resolve(checked)
        if found is None:
            raise resource_not_found(checked)
        item, raw = found
        item.require_scopes(ctx, checked if isinstance(item, Resource) else item.template)
        params = item.convert(checked, raw) if isinstance(item, ResourceTemplate) else {}
        return item, checked, params

    async def read(self, ctx: RequestContext, uri: object) -> list[Contents]:
        """``resources/read`` of ``uri``.

        :raises McpError: -32602 for a malformed, unknown or unreadable URI, a bad
            variable or oversize content (see :mod:`~mcp_oauth.mcp_server.registry.errors`).
        :raises InsufficientScope: the item needs scopes the token lacks.
        """
        item, checked, params = await self.locate(ctx, uri)
        try:
            if isinstance(item, ResourceTemplate):
                contents = await item.read(ctx.with_arguments(dict(params)), checked, params)
            else:
                contents = await item.read(ctx, checked)
        except ResourceNotFound:
            raise resource_not_found(checked) from None
        return contents

    async def readable(self, ctx: RequestContext, uri: object) -> str:
        """``uri`` when ``ctx`` may read it (for ``resources/subscribe``). :raises: as :meth:`read`."""
        item, checked, params = await self.locate(ctx, uri)
        try:
            ok = await item.exists(ctx, checked, params)
        except ResourceNotFound:
            ok = False
        if not ok:
            raise resource_not_found(checked)
        return checked

    def __iter__(self) -> Iterator[Resource | ResourceTemplate]:
        return iter([*self._resources.values(), *self._templates.values()])


def active_resource_registry() -> ResourceRegistry:
    """The registry named by ``MCP_OAUTH["RESOURCE_REGISTRY"]`` (an instance or its dotted path,
    imported once by the settings object)."""
    return mcp_oauth_settings.RESOURCE_REGISTRY


#: The default registry (``MCP_OAUTH["RESOURCE_REGISTRY"] = "mcp_oauth.mcp_server.registry.resources.registry"``).
registry = ResourceRegistry()

#: ``@resource(uri, ...)`` on the default :data:`registry`.
resource = registry.resource

#: ``@resource_template(uri_template, ...)`` on the default :data:`registry`.
resource_template = registry.resource_template
