"""Registered resources: :class:`Resource` (one URI) and :class:`ResourceTemplate` (an RFC 6570 template)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from mcp_oauth.mcp_server.registry.base import call, missing_scopes
from mcp_oauth.mcp_server.registry.contents import Contents, ResourceNotFound, content_size, to_contents
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import InsufficientScope, invalid_uri, resource_too_large
from mcp_oauth.mcp_server.registry.uritemplate import UriTemplate
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["Resource", "ResourceTemplate", "template_adapters"]


@dataclass(eq=False)
class _Item:
    """What static resources and templates share."""

    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    scopes: tuple[str, ...] = ()
    annotations: types.Annotations | None = None
    icons: list[types.Icon] | None = None
    meta: dict[str, Any] | None = None
    max_bytes: int | None = None

    def offered(self) -> bool:
        """Whether the item has anything to serve now (an item with nothing installed behind it,
        such as the skill files' template without a skill, is left out of the capabilities and of
        ``resources/templates/list``)."""
        return True

    def allowed(self, ctx: RequestContext) -> bool:
        """Whether the token has every scope of this item."""
        return not missing_scopes(self.scopes, ctx.scopes)

    def require_scopes(self, ctx: RequestContext, shown: str) -> None:
        """:raises InsufficientScope: the token lacks scopes this item needs."""
        missing = missing_scopes(self.scopes, ctx.scopes)
        if missing:
            raise InsufficientScope("resource", shown, self.scopes, missing)

    def limit(self) -> int:
        return int(self.max_bytes if self.max_bytes is not None else mcp_oauth_settings.RESOURCE_MAX_BYTES)

    def finish(self, uri: str, value: Any) -> list[Contents]:
        """``value`` as contents, within the size limit. :raises McpError: too large."""
        contents = to_contents(uri, self.mime_type, value)
        size = content_size(contents)
        if size > self.limit():
            raise resource_too_large(uri, size, self.limit())
        return contents


@dataclass(eq=False)
class Resource(_Item):
    """One static resource (a fixed URI). ``fn(ctx)`` or ``fn()`` returns its content."""

    uri: str = ""
    fn: Callable[..., Any] | None = None
    size: int | None = None
    context_param: str | None = None

    def definition(self) -> types.Resource:
        """The ``Resource`` entry of ``resources/list``."""
        return types.Resource(
            uri=self.uri,
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            size=self.size,
            annotations=self.annotations,
            icons=self.icons,
            _meta=self.meta,
        )

    async def read(self, ctx: RequestContext, uri: str) -> list[Contents]:
        """Call the reader and return its contents. :raises ResourceNotFound | McpError:"""
        assert self.fn is not None
        kwargs = {self.context_param: ctx} if self.context_param else {}
        return self.finish(uri, await call(self.fn, **kwargs))

    async def exists(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> bool:
        return True


@dataclass(eq=False)
class ResourceTemplate(_Item):
    """A family of resources named by an RFC 6570 URI template.

    ``fn(ctx, **variables)`` reads one; ``lister(ctx)`` (optional) lists concrete
    resources; ``completers`` maps a variable to ``fn(ctx, value) -> list[str]``
    (``ctx.arguments`` holds the variables already chosen).
    """

    uri_template: UriTemplate | None = None
    fn: Callable[..., Any] | None = None
    lister: Callable[..., Any] | None = None
    describe: Callable[[Any], Any] | None = None
    completers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    context_param: str | None = None
    adapters: dict[str, TypeAdapter] = field(default_factory=dict, repr=False)
    type_names: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def template(self) -> str:
        assert self.uri_template is not None
        return self.uri_template.template

    def definition(self) -> types.ResourceTemplate:
        """The ``ResourceTemplate`` entry of ``resources/templates/list``."""
        return types.ResourceTemplate(
            uri_template=self.template,
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            annotations=self.annotations,
            icons=self.icons,
            _meta=self.meta,
        )

    def match(self, uri: str) -> dict[str, str] | None:
        assert self.uri_template is not None
        return self.uri_template.match(uri)

    def convert(self, uri: str, raw: dict[str, str]) -> dict[str, Any]:
        """The variables converted to the reader's parameter types.

        :raises McpError: -32602 naming the first parameter that fails its type.
        """
        values: dict[str, Any] = {}
        for name, text in raw.items():
            adapter = self.adapters.get(name)
            if adapter is None:
                values[name] = text
                continue
            try:
                values[name] = adapter.validate_strings(text)
            except ValidationError:
                raise invalid_uri(
                    uri, name, f"must be {self.type_names.get(name, 'valid')}, got {text[:50]!r}"
                ) from None
        return values

    async def read(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> list[Contents]:
        """Read the resource ``uri`` with converted ``params``. :raises ResourceNotFound | McpError:"""
        assert self.fn is not None
        kwargs = dict(params)
        if self.context_param:
            kwargs[self.context_param] = ctx
        return self.finish(uri, await call(self.fn, **kwargs))

    async def exists(self, ctx: RequestContext, uri: str, params: dict[str, Any]) -> bool:
        """Whether ``uri`` names something ``ctx``'s user may read (reads it; subclasses do better)."""
        try:
            await self.read(ctx, uri, params)
        except ResourceNotFound:
            return False
        return True

    def entry(self, item: Any) -> types.Resource:
        """One ``resources/list`` entry from what the lister yields."""
        if self.describe is not None:
            item = self.describe(item)
        if isinstance(item, types.Resource):
            return item
        if isinstance(item, Mapping):
            return types.Resource.model_validate(dict(item))
        raise TypeError(f"resource template {self.name!r}: the lister yielded {type(item).__name__}, not a Resource")

    async def list_entries(self, ctx: RequestContext, start: int, stop: int) -> tuple[list[types.Resource], int]:
        """Entries ``start:stop`` of the lister's output and the total count (a QuerySet is sliced in SQL)."""
        if self.lister is None:
            return [], 0

        def page(source: Any) -> tuple[list[types.Resource], int]:
            if hasattr(source, "count") and hasattr(source, "__getitem__") and not isinstance(source, (list, tuple)):
                total = source.count()
                return [self.entry(item) for item in source[start:stop]], total
            items = list(source)
            return [self.entry(item) for item in items[start:stop]], len(items)

        source = await call(self.lister, ctx)
        return await call(page, source)

    async def complete(self, ctx: RequestContext, argument: str, value: str) -> Any:
        """What the completer of ``argument`` returns (``[]`` without one)."""
        completer = self.completers.get(argument)
        if completer is None:
            return []
        return await call(completer, ctx, value)


def _type_name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def template_adapters(
    fn: Callable[..., Any], variables: Iterable[str], what: str
) -> tuple[dict[str, TypeAdapter], dict[str, str]]:
    """Type adapters for the reader parameters named like the template's variables."""
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{what}: cannot resolve the type hints of its parameters: {exc}") from None
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    adapters: dict[str, TypeAdapter] = {}
    names: dict[str, str] = {}
    for variable in variables:
        parameter = signature.parameters.get(variable)
        if parameter is None:
            if not accepts_any:
                raise ValueError(f"{what}: the reader has no parameter for the template variable {variable!r}")
            continue
        annotation = hints.get(variable, parameter.annotation)
        if annotation in (inspect.Parameter.empty, str, Any):
            continue
        adapters[variable] = TypeAdapter(annotation)
        names[variable] = _type_name(annotation)
    return adapters, names
