"""The prompt registry (MCP 2025-11-25 / 2026-07-28 "Server Features / Prompts").

Register prompt renderers on the default :data:`registry`, typically in an app's
``mcp_prompts.py`` (autodiscovered at start-up like ``mcp_tools.py``)::

    from mcp_oauth.mcp_server.registry import RequestContext, prompt

    def languages(ctx: RequestContext, value: str) -> list[str]:
        return [lang for lang in ("python", "rust", "go") if lang.startswith(value)]

    @prompt(title="Code review", arguments={"code": "The code to review"},
            completers={"language": languages})
    def code_review(ctx: RequestContext, code: str, language: str = "python") -> str:
        return f"Review this {language} code:\\n{code}"

* **Arguments** are the renderer's parameters (the context parameter excluded):
  required when they have no default. ``arguments`` gives their descriptions
  (a dict) or the full list (``mcp_types.PromptArgument`` / dicts). Values are
  strings (MCP ``GetPromptRequest.arguments``).
* ``prompts/get`` without a required argument, or with one the prompt does not
  declare, answers ``-32602`` naming every such argument.
* **Return values** become ``messages``: ``str`` -> one ``user`` text message; a
  content block (``TextContent``, ``ImageContent``, ``AudioContent``,
  ``EmbeddedResource``, ``ResourceLink``) -> one ``user`` message with it; a
  ``PromptMessage`` or ``{"role": …, "content": …}`` dict -> itself; a list of
  any of these -> several messages; a ``GetPromptResult`` passes through.
* **Scopes**: as for tools and resources (hidden from ``prompts/list`` without
  them; ``prompts/get`` then answers HTTP 403 ``insufficient_scope``).
* **Completers** per argument: ``fn(ctx, value)`` (sync or async) returning a list
  of strings (or an ``mcp_types.Completion``); ``ctx.arguments`` carries the
  earlier arguments the client sent in ``context.arguments``.
"""

from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter

from mcp_oauth.mcp_server.registry.base import (
    NAME_RE,
    NamedRegistry,
    call,
    context_parameter,
    missing_scopes,
    scope_tuple,
)
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.errors import InsufficientScope
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError

__all__ = ["Prompt", "PromptRegistry", "prompt", "registry", "to_messages"]

#: Prompt names: like tool names (1-128 of ``A-Z a-z 0-9 _ - .``).
PROMPT_NAME_RE = NAME_RE
_CONTENT_TYPES = (
    types.TextContent,
    types.ImageContent,
    types.AudioContent,
    types.ResourceLink,
    types.EmbeddedResource,
)
_MESSAGE = TypeAdapter(types.PromptMessage)


def _show(value: str, limit: int = 100) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _message(value: Any) -> types.PromptMessage:
    if isinstance(value, types.PromptMessage):
        return value
    if isinstance(value, str):
        return types.PromptMessage(role="user", content=types.TextContent(text=value))
    if isinstance(value, _CONTENT_TYPES):
        return types.PromptMessage(role="user", content=value)
    if isinstance(value, Mapping):
        return _MESSAGE.validate_python(dict(value), by_name=False)
    raise TypeError(f"a prompt cannot return {type(value).__name__} as a message")


def to_messages(value: Any) -> tuple[list[types.PromptMessage], str | None]:
    """A renderer's return value as messages (and a description, from a ``GetPromptResult``).

    :raises TypeError | ValidationError: a value that is not a message.
    """
    if isinstance(value, types.GetPromptResult):
        return list(value.messages), value.description
    if isinstance(value, (list, tuple)):
        return [_message(item) for item in value], None
    return [_message(value)], None


@dataclass(eq=False)
class Prompt:
    """One registered prompt. Build it with :meth:`PromptRegistry.register`."""

    name: str
    fn: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    arguments: list[types.PromptArgument] = field(default_factory=list)
    scopes: tuple[str, ...] = ()
    completers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    icons: list[types.Icon] | None = None
    meta: dict[str, Any] | None = None
    context_param: str | None = None
    accepts_any: bool = False

    def definition(self) -> types.Prompt:
        """The ``Prompt`` entry of ``prompts/list``."""
        return types.Prompt(
            name=self.name,
            title=self.title,
            description=self.description,
            arguments=self.arguments or None,
            icons=self.icons,
            _meta=self.meta,
        )

    def allowed(self, ctx: RequestContext) -> bool:
        return not missing_scopes(self.scopes, ctx.scopes)

    def require_scopes(self, ctx: RequestContext) -> None:
        """:raises InsufficientScope: the token lacks scopes this prompt needs."""
        missing = missing_scopes(self.scopes, ctx.scopes)
        if missing:
            raise InsufficientScope("prompt", self.name, self.scopes, missing)

    def check_arguments(self, arguments: Mapping[str, str] | None) -> dict[str, str]:
        """The arguments, if every required one is there and none is unknown.

        :raises McpError: -32602 naming the missing (or unknown) arguments.
        """
        given = dict(arguments or {})
        declared = {argument.name for argument in self.arguments}
        missing = [a.name for a in self.arguments if a.required and (given.get(a.name) in (None, ""))]
        if missing:
            raise McpError(
                INVALID_PARAMS,
                f"Missing required argument(s) for prompt {self.name!r}: {', '.join(missing)}",
                {"prompt": self.name, "missing": missing},
            )
        unknown = sorted(name for name in given if name not in declared)
        if unknown and not self.accepts_any:
            shown = [_show(name) for name in unknown[:20]]
            raise McpError(
                INVALID_PARAMS,
                f"Unknown argument(s) for prompt {self.name!r}: {', '.join(shown)}",
                {"prompt": self.name, "unknown": shown},
            )
        return given

    async def render(self, ctx: RequestContext, arguments: Mapping[str, str] | None) -> types.GetPromptResult:
        """``prompts/get``: check the arguments, call the renderer, build the result.

        :raises McpError: argument errors (-32602), or whatever the renderer raises as one.
        """
        kwargs: dict[str, Any] = self.check_arguments(arguments)
        if self.context_param:
            kwargs[self.context_param] = ctx.with_arguments({k: v for k, v in kwargs.items() if isinstance(v, str)})
        value = await call(self.fn, **kwargs)
        messages, description = to_messages(value)
        return types.GetPromptResult(description=description or self.description, messages=messages)

    async def complete(self, ctx: RequestContext, argument: str, value: str) -> Any:
        """What the completer of ``argument`` returns (``[]`` without one)."""
        completer = self.completers.get(argument)
        if completer is None:
            return []
        return await call(completer, ctx, value)


def _arguments(
    fn: Callable[..., Any],
    context_param: str | None,
    given: Mapping[str, str] | Iterable[types.PromptArgument | Mapping[str, Any]] | None,
    what: str,
) -> tuple[list[types.PromptArgument], bool]:
    signature = inspect.signature(fn)
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    if given is not None and not isinstance(given, Mapping):
        listed = [
            a if isinstance(a, types.PromptArgument) else types.PromptArgument.model_validate(dict(a)) for a in given
        ]
        for argument in listed:
            if argument.name not in signature.parameters and not accepts_any:
                raise ValueError(f"{what}: argument {argument.name!r} is not a parameter of the renderer")
        return listed, accepts_any
    descriptions = dict(given or {})
    arguments = []
    for parameter in signature.parameters.values():
        if parameter.name == context_param or parameter.kind in (
            inspect.Parameter.VAR_KEYWORD,
            inspect.Parameter.VAR_POSITIONAL,
        ):
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ValueError(f"{what}: positional-only parameter {parameter.name!r} cannot be an argument")
        arguments.append(
            types.PromptArgument(
                name=parameter.name,
                description=descriptions.pop(parameter.name, None),
                required=parameter.default is inspect.Parameter.empty,
            )
        )
    if descriptions:
        raise ValueError(f"{what}: descriptions for unknown arguments {sorted(descriptions)}")
    return arguments, accepts_any


class PromptRegistry(NamedRegistry[Prompt]):
    """A named set of prompts. The endpoint serves the one named by ``MCP_OAUTH["PROMPT_REGISTRY"]``
    (default :data:`registry`). Iteration and :meth:`list` keep registration order.
    """

    kind = "prompt"
    list_kind = "prompts"

    def register(  # type: ignore[override]
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        arguments: Mapping[str, str] | Iterable[types.PromptArgument | Mapping[str, Any]] | None = None,
        scopes: Iterable[str] | str = (),
        completers: Mapping[str, Callable[..., Any]] | None = None,
        icons: Iterable[types.Icon | Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Prompt:
        """Register ``fn`` as a prompt renderer and return its :class:`Prompt`.

        :raises ValueError: invalid or duplicate name, a completer or description for
            an unknown argument, a malformed scope.
        """
        prompt_name = self._item_name(fn, name)
        what = f"prompt {prompt_name!r}"
        context_param = context_parameter(fn)
        argument_list, accepts_any = _arguments(fn, context_param, arguments, what)
        completer_map = dict(completers or {})
        names = {argument.name for argument in argument_list}
        for argument in completer_map:
            if argument not in names:
                raise ValueError(f"{what}: completer for unknown argument {argument!r}")
        item = Prompt(
            name=prompt_name,
            fn=fn,
            title=title,
            description=description if description is not None else inspect.getdoc(fn),
            arguments=argument_list,
            scopes=scope_tuple(scopes, what),
            completers=completer_map,
            icons=[i if isinstance(i, types.Icon) else types.Icon.model_validate(dict(i)) for i in icons]
            if icons is not None
            else None,
            meta=meta,
            context_param=context_param,
            accepts_any=accepts_any,
        )
        return self._add(prompt_name, item)

    def prompt(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Decorator form of :meth:`register`: ``@registry.prompt`` or ``@registry.prompt(title=...)``."""
        return self._decorate(fn, options)

    def visible(self, ctx: RequestContext) -> builtins.list[Prompt]:  # the builtin: ``list`` here is the method
        """The prompts ``ctx``'s token may use."""
        return [item for item in self._items.values() if item.allowed(ctx)]

    def find(self, ctx: RequestContext, name: object) -> Prompt:
        """The prompt ``name`` for this request.

        :raises McpError: -32602 "Unknown prompt".
        :raises InsufficientScope: it needs scopes the token lacks.
        """
        item = self.get(name)
        if item is None:
            raise McpError(INVALID_PARAMS, f"Unknown prompt: {_show(str(name))}", {"prompt": _show(str(name))})
        item.require_scopes(ctx)
        return item


#: The default registry (``MCP_OAUTH["PROMPT_REGISTRY"] = "mcp_oauth.mcp_server.registry.prompts.registry"``).
registry = PromptRegistry()

#: ``@prompt`` / ``@prompt(name=..., completers={...})`` on the default :data:`registry`.
prompt = registry.prompt
