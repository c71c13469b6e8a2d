"""The tool registry a site uses to expose MCP tools (MCP 2025-11-25 "Server Features / Tools").

Register functions on the default :data:`registry` with the :func:`tool`
decorator, typically in an app's ``mcp_tools.py`` (autodiscovered at start-up)::

    from mcp_oauth.mcp_server.tools import ToolContext, tool

    @tool(scopes=["mcp"], title="Echo", annotations={"readOnlyHint": True})
    async def echo(ctx: ToolContext, text: str, times: int = 1) -> str:
        "Repeat ``text``."
        await ctx.report_progress(1, 1)
        return " ".join([text] * times)

* **Name** defaults to the function name; names follow MCP "Tool Names"
  (1-128 of ``A-Z a-z 0-9 _ - .``), duplicates raise :class:`ValueError`.
* **Input schema** is derived from the type hints with pydantic (the context
  parameter excluded; unknown arguments refused: ``additionalProperties: false``),
  or given as a JSON Schema dict (checked against Draft 2020-12 at registration;
  arguments are validated with ``jsonschema`` and passed as keyword arguments).
  Invalid arguments answer a tool execution error (``isError: true``, one text block listing
  the bad fields; MCP 2025-11-25 "Tools" § Error Handling, SEP-1303), so the model can correct
  them; an unknown tool is JSON-RPC ``-32602``.
* **Output schema** is optional: a dict, or derived from a pydantic model return
  annotation; structured results are then validated against it.
* **Scopes** a tool needs beyond the resource's own: a token without them gets
  HTTP 403 ``insufficient_scope`` (MCP "Scope Challenge Handling"), so the client
  can step up.
* The function may be sync (run with ``sync_to_async``, thread-sensitive) or async.
  It receives a :class:`ToolContext` as its first parameter named ``ctx``, or as the
  parameter annotated ``ToolContext``.

Return values become a ``CallToolResult``: ``str`` -> one text block; a dict
(or pydantic model dumping to one) -> ``structuredContent`` plus a text block
with its JSON; other JSON values (lists, numbers) -> a text block with their
JSON; a content block or a list of them, or a ``CallToolResult``, pass through;
``None`` -> no content. A :class:`ToolError` becomes ``isError: true`` with its
message; any other exception ``isError: true`` with a generic message (the
traceback is logged, not sent); :class:`McpError` becomes a JSON-RPC error.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

import jsonschema
import mcp_types as types
import pydantic_core
from asgiref.sync import iscoroutinefunction, sync_to_async
from django.db import IntegrityError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticSchemaGenerationError,
    PydanticUserError,
    ValidationError,
    create_model,
)

from mcp_oauth.mcp_server.drf_tools.publish import DrfTool, view_tool, viewset_tools
from mcp_oauth.mcp_server.mcp_apps.resources import register_view
from mcp_oauth.mcp_server.mcp_apps.views import AppView, as_view, check_visibility, client_supports_apps
from mcp_oauth.mcp_server.mcp_tasks.policy import TaskPolicy, as_policy
from mcp_oauth.mcp_server.registry.base import NAME_RE, NamedRegistry, call, context_parameter, scope_tuple
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry, active_resource_registry
from mcp_oauth.mcp_server.transport.context import ToolContext
from mcp_oauth.mcp_server.transport.input_required import InputRequest, InputRequired
from mcp_oauth.mcp_server.transport.jsonrpc import McpError
from mcp_oauth.mcp_server.transport.token_exchange import ExchangedToken, TokenExchangeError
from mcp_oauth.resource_server.authentication import BearerPrincipal, PrincipalGone, principal_gone

__all__ = [
    "ExchangedToken",
    "InputRequest",
    "InputRequired",
    "InvalidArguments",
    "McpError",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "TokenExchangeError",
    "registry",
    "to_call_tool_result",
    "tool",
]

logger = logging.getLogger("mcp_oauth.tools")

#: MCP 2025-11-25 "Tool Names" (SEP-986).
TOOL_NAME_RE = NAME_RE
_CONTENT_TYPES = (
    types.TextContent,
    types.ImageContent,
    types.AudioContent,
    types.ResourceLink,
    types.EmbeddedResource,
)
_MAX_ERROR_MESSAGES = 20


class ToolError(Exception):
    """Raise from a tool to fail the call with this message shown to the client (``isError: true``)."""


class InvalidArguments(ValueError):
    """The arguments do not match the tool's input schema.

    ``errors`` is a list of ``{"field": "a.b", "message": "..."}``; ``str()`` is
    one readable line naming every bad field.
    """

    def __init__(self, tool_name: str, errors: list[dict[str, str]]) -> None:
        self.tool_name = tool_name
        self.errors = errors
        listed = "; ".join(f"{e['field'] or '(arguments)'}: {e['message']}" for e in errors)
        super().__init__(f"Invalid arguments for tool {tool_name!r}: {listed}")


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arguments_model(name: str, fn: Callable, context_param: str | None) -> tuple[type[BaseModel], list[str]]:
    """A pydantic model of ``fn``'s parameters (aliases = parameter names) and the parameter names."""
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - NameError for a forward reference, TypeError, …
        raise ValueError(f"tool {name!r}: cannot resolve the type hints of its parameters: {exc}") from None
    fields: dict[str, Any] = {}
    names: list[str] = []
    for index, parameter in enumerate(signature.parameters.values()):
        if parameter.name == context_param:
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ValueError(f"tool {name!r}: *args/**kwargs need an explicit input_schema")
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ValueError(f"tool {name!r}: positional-only parameter {parameter.name!r} cannot be an argument")
        annotation = hints.get(parameter.name, parameter.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[f"p{index}"] = (annotation, Field(default, alias=parameter.name))
        names.append(parameter.name)
    try:
        model = create_model(
            f"{name}Arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=False),
            **fields,
        )
        model.model_json_schema(by_alias=True)
    except (PydanticUserError, PydanticSchemaGenerationError, TypeError) as exc:
        raise ValueError(f"tool {name!r}: cannot derive an input schema from its parameters: {exc}") from None
    return model, names


def _check_object_schema(schema: Any, what: str, name: str) -> dict[str, Any]:
    if not isinstance(schema, dict):
        raise ValueError(f"tool {name!r}: {what} must be a JSON Schema object (dict)")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ValueError(f"tool {name!r}: invalid {what}: {exc.message}") from None
    if schema.get("type") != "object":
        raise ValueError(f'tool {name!r}: {what} must have "type": "object" at its root (MCP 2025-11-25 "Tools")')
    return schema


def _jsonschema_errors(validator: jsonschema.Draft202012Validator, instance: Any) -> list[dict[str, str]]:
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [
        {"field": ".".join(str(p) for p in error.absolute_path), "message": _error_message(error)}
        for error in errors[:_MAX_ERROR_MESSAGES]
    ]


def _error_message(error: jsonschema.ValidationError) -> str:
    """The error's message; for a long value (a 100,000-character string), what it fails rather than
    the value echoed and cut before the reason."""
    instance = error.instance
    if (
        isinstance(instance, (str, list, dict))
        and len(repr(instance)) > 100
        and error.validator != "additionalProperties"
    ):
        unit = "characters" if isinstance(instance, str) else "items"
        return _short(f"a value of {len(instance)} {unit} fails {error.validator}: {error.validator_value!r}")
    return _short(error.message)


@dataclass(eq=False)
class Tool:
    """One registered tool. Build it with :meth:`ToolRegistry.register` rather than directly.

    ``scopes`` are the scopes the tool needs (beyond the resource's); ``annotations``
    an ``mcp_types.ToolAnnotations``; ``input_schema``/``output_schema`` JSON Schema dicts.
    """

    name: str
    fn: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] = field(default_factory=dict)
    output_schema: dict[str, Any] | None = None
    scopes: tuple[str, ...] = ()
    annotations: types.ToolAnnotations | None = None
    icons: list[types.Icon] | None = None
    meta: dict[str, Any] | None = None
    context_param: str | None = None
    is_async: bool = False
    arguments_model: type[BaseModel] | None = field(default=None, repr=False)
    parameter_names: list[str] = field(default_factory=list, repr=False)
    input_validator: jsonschema.Draft202012Validator | None = field(default=None, repr=False)
    output_validator: jsonschema.Draft202012Validator | None = field(default=None, repr=False)
    #: How the tool runs as a task (MCP Tasks extension), or None: never.
    task: TaskPolicy | None = None
    #: Its view (MCP Apps extension), or None.
    ui: AppView | None = None
    #: ``_meta.ui.visibility`` (MCP Apps), or None: not declared (``["model", "app"]``).
    visibility: tuple[str, ...] | None = None

    def definition(self, *, apps: bool = True) -> types.Tool:
        """The ``Tool`` object listed by ``tools/list``; with ``apps`` (the client declared the MCP
        Apps extension) its ``_meta.ui`` (``resourceUri``, ``visibility``) when it has a view."""
        meta = self.meta
        if apps and (self.ui is not None or self.visibility is not None):
            ui: dict[str, Any] = {}
            if self.ui is not None:
                ui["resourceUri"] = self.ui.uri
            if self.visibility is not None:
                ui["visibility"] = list(self.visibility)
            meta = {**(meta or {}), "ui": ui}
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
            annotations=self.annotations,
            icons=self.icons,
            _meta=meta,
        )

    def listed_definition(self, client_capabilities: Mapping[str, Any]) -> types.Tool | None:
        """The definition ``tools/list`` shows a client with ``client_capabilities``, or None when the
        tool is for apps only (``visibility: ["app"]``) and the client declared no MCP Apps support
        (it has no app to call it from; SEP-1865 "Visibility")."""
        apps = client_supports_apps(client_capabilities) if self.ui is not None or self.visibility else False
        if not apps and self.visibility is not None and "model" not in self.visibility:
            return None
        return self.definition(apps=apps)

    def validate_arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Check ``arguments`` against the input schema; return the keyword arguments for the function.

        :raises InvalidArguments: with every bad field (``isError: true`` at the endpoint).
        """
        arguments = dict(arguments or {})
        if self.arguments_model is not None:
            try:
                instance = self.arguments_model.model_validate(arguments)
            except ValidationError as exc:
                errors = [
                    {"field": ".".join(str(p) for p in error["loc"]), "message": _short(error["msg"])}
                    for error in exc.errors(include_url=False, include_context=False, include_input=False)
                ][:_MAX_ERROR_MESSAGES]
                raise InvalidArguments(self.name, errors) from None
            return {
                name: getattr(instance, f"p{index}")
                for index, name in zip(self._field_indexes(), self.parameter_names, strict=True)
            }
        assert self.input_validator is not None
        errors = _jsonschema_errors(self.input_validator, arguments)
        if errors:
            raise InvalidArguments(self.name, errors)
        return arguments

    def _field_indexes(self) -> Iterator[int]:
        assert self.arguments_model is not None
        return (int(key[1:]) for key in self.arguments_model.model_fields)

    async def invoke(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> Any:
        """Call the function with ``ctx`` and validated ``arguments``; return what it returns."""
        kwargs = dict(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        return await call(self.fn, **kwargs)

    async def call(self, ctx: ToolContext, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """:meth:`invoke` and convert to a ``CallToolResult`` (MCP "Error Handling": tool errors in the result).

        :raises McpError: the tool raised one (answered as a JSON-RPC error).
        :raises PrincipalGone: a write keyed to the token's user or client failed because they
            are gone (the endpoint answers 401 ``invalid_token``).
        :raises InputRequired: (2026-07-28) a helper needs the user's input first
            (answered as ``resultType: "input_required"``).
        """
        try:
            value = await self.invoke(ctx, arguments)
        except (McpError, InputRequired):
            raise
        except ToolError as exc:
            return error_result(str(exc) or f"Tool {self.name!r} failed.")
        except IntegrityError:
            # a row keyed to the user or client (an elicitation, a connection) after they were
            # deleted elsewhere: 401 invalid_token for the request, not a tool error
            principal = getattr(ctx, "principal", None)
            if isinstance(principal, BearerPrincipal) and await sync_to_async(principal_gone)(principal):
                raise PrincipalGone from None
            logger.exception("tool %r raised", self.name)
            return error_result(f"Tool {self.name!r} failed with an internal error.")
        except Exception:
            logger.exception("tool %r raised", self.name)
            return error_result(f"Tool {self.name!r} failed with an internal error.")
        try:
            result = to_call_tool_result(value)
        except (ValueError, TypeError, ValidationError, pydantic_core.PydanticSerializationError):
            logger.exception("tool %r returned a value that cannot be sent", self.name)
            return error_result(f"Tool {self.name!r} returned a value that cannot be sent.")
        if self.output_validator is not None and not result.is_error:
            if not isinstance(result.structured_content, dict) or _jsonschema_errors(
                self.output_validator, result.structured_content
            ):
                logger.error("tool %r returned output that does not match its outputSchema", self.name)
                return error_result(f"Tool {self.name!r} returned output that does not match its output schema.")
        return result


def error_result(message: str) -> types.CallToolResult:
    """``CallToolResult(isError=True)`` with one text block."""
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def to_call_tool_result(value: Any) -> types.CallToolResult:
    """Convert a tool's return value (see the module docstring for the rules).

    :raises TypeError | PydanticSerializationError: the value is not JSON-serialisable.
    """
    if isinstance(value, types.CallToolResult):
        return value
    if value is None:
        return types.CallToolResult(content=[])
    if isinstance(value, str):
        return types.CallToolResult(content=[types.TextContent(text=value)])
    if isinstance(value, _CONTENT_TYPES):
        return types.CallToolResult(content=[value])
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, _CONTENT_TYPES) for item in value):
        return types.CallToolResult(content=list(value))
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    jsonable = pydantic_core.to_jsonable_python(value)
    text = json.dumps(jsonable, ensure_ascii=False, allow_nan=False)
    structured = jsonable if isinstance(jsonable, dict) else None
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


class ToolRegistry(NamedRegistry[Tool]):
    """A named set of tools. The endpoint serves the one named by ``MCP_OAUTH["TOOL_REGISTRY"]``
    (default :data:`registry`), or the one given to :class:`~mcp_oauth.mcp_server.transport.views.McpView`.

    Iteration and :meth:`list` keep registration order; registering or unregistering a tool
    sends ``notifications/tools/list_changed`` to the listen streams that opted in
    (:class:`~mcp_oauth.mcp_server.registry.base.NamedRegistry`).
    """

    kind = "tool"
    list_kind = "tools"

    def __init__(self, name: str = "default", *, resources: ResourceRegistry | None = None) -> None:
        super().__init__(name)
        #: Where the views' ``ui://`` resources go; None: the active resource registry
        #: (``MCP_OAUTH["RESOURCE_REGISTRY"]``) at registration.
        self.resources = resources

    def register(  # type: ignore[override]
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        annotations: types.ToolAnnotations | Mapping[str, Any] | None = None,
        icons: Iterable[types.Icon | Mapping[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        task: TaskPolicy | str | bool | None = None,
        ui: AppView | str | Mapping[str, Any] | None = None,
        visibility: Iterable[str] | None = None,
    ) -> Tool:
        """Register ``fn`` as a tool and return its :class:`Tool`.

        :param ui: its view (MCP Apps extension, ``io.modelcontextprotocol/ui``): a template name
            (``"notes/notes_app.html"``), an :class:`~mcp_oauth.mcp_server.mcp_apps.views.AppView` or its
            keyword arguments. The view's ``ui://`` resource is registered in the registry's
            resource registry (once for tools sharing a view); see ``docs/how-to/mcp-apps.md``.
        :param visibility: ``_meta.ui.visibility``: ``["model", "app"]`` (the default when
            omitted), ``["app"]`` (called by the app only: hidden from clients without the
            extension) or ``["model"]``.

        :param task: run as a task of the MCP Tasks extension (``io.modelcontextprotocol/tasks``):
            a :class:`~mcp_oauth.mcp_server.mcp_tasks.TaskPolicy`, ``"always"``, ``"optional"`` (a task when
            the request declares the extension) or None/``"never"`` (see ``docs/how-to/tasks.md``).
        :raises ValueError: invalid or duplicate name, invalid schema, a signature
            that cannot be turned into a schema, a malformed scope, an invalid task policy, a
            malformed view or visibility, a view URI taken by another resource.
        """
        task_policy = as_policy(task)
        tool_name = self._item_name(fn, name)
        view = as_view(ui) if ui is not None else None
        tool_visibility = check_visibility(visibility, f"tool {tool_name!r}")
        tool_scopes = scope_tuple(scopes, f"tool {tool_name!r}")
        try:
            hints = get_type_hints(fn, include_extras=False)
        except Exception:  # noqa: BLE001 - unresolvable forward references: no derived output schema
            hints = {}
        context_param = context_parameter(fn, ToolContext)

        arguments_model = None
        parameter_names: list[str] = []
        input_validator = None
        if input_schema is None:
            arguments_model, parameter_names = _arguments_model(tool_name, fn, context_param)
            schema = arguments_model.model_json_schema(by_alias=True)
        else:
            schema = _check_object_schema(input_schema, "input_schema", tool_name)
            input_validator = jsonschema.Draft202012Validator(schema)

        returns = hints.get("return")
        if output_schema is None and isinstance(returns, type) and issubclass(returns, BaseModel):
            output_schema = returns.model_json_schema(mode="serialization", by_alias=True)
        output_validator = None
        if output_schema is not None:
            output_schema = _check_object_schema(output_schema, "output_schema", tool_name)
            output_validator = jsonschema.Draft202012Validator(output_schema)

        if annotations is not None and not isinstance(annotations, types.ToolAnnotations):
            annotations = types.ToolAnnotations.model_validate(dict(annotations))
        icon_list = None
        if icons is not None:
            icon_list = [i if isinstance(i, types.Icon) else types.Icon.model_validate(dict(i)) for i in icons]

        tool_obj = Tool(
            name=tool_name,
            fn=fn,
            title=title,
            description=description if description is not None else inspect.getdoc(fn),
            input_schema=schema,
            output_schema=output_schema,
            scopes=tool_scopes,
            annotations=annotations,
            icons=icon_list,
            meta=meta,
            context_param=context_param,
            is_async=iscoroutinefunction(fn),
            arguments_model=arguments_model,
            parameter_names=parameter_names,
            input_validator=input_validator,
            output_validator=output_validator,
            task=task_policy,
            ui=view,
            visibility=tool_visibility,
        )
        if view is not None:
            register_view(view, self.resources if self.resources is not None else active_resource_registry())
        return self._add(tool_name, tool_obj)

    def drf_viewset(
        self,
        viewset: type,
        *,
        basename: str,
        actions: Iterable[str] | None = None,
        scopes: Iterable[str] = (),
        descriptions: Mapping[str, str] | None = None,
    ) -> list[Tool]:
        """Publish the actions of a DRF ``ViewSet`` as tools ``<basename>_<action>`` (``docs/how-to/drf-tools.md``).

        Each tool runs the view in-process as the token's user: its permissions, throttles and
        serializer validation unchanged (:mod:`mcp_oauth.mcp_server.drf_tools`).

        :param actions: the actions to publish, in order (default: every router action the ViewSet
            has, then its ``@action`` methods).
        :param scopes: scopes every one of these tools needs beyond the resource's.
        :param descriptions: action -> description, instead of the docstrings.
        :raises ValueError: not a ViewSet, an unknown action, a name already registered.
        """
        built = viewset_tools(viewset, basename=basename, actions=actions, descriptions=descriptions)
        return [self._register_drf(item, scopes) for item in built]

    def drf_view(
        self,
        view: type,
        *,
        method: str,
        name: str,
        scopes: Iterable[str] = (),
        **options: Any,
    ) -> Tool:
        """Publish one HTTP method of a DRF ``APIView`` as the tool ``name``; ``options`` as
        :func:`mcp_oauth.mcp_server.drf_tools.publish.view_tool` (``serializer``, ``output_serializer``,
        ``url_kwargs``, ``url_name``, ``description``).

        :raises ValueError: not an APIView, a method it does not handle, a name already registered.
        """
        return self._register_drf(view_tool(view, method=method, name=name, **options), scopes)

    def _register_drf(self, item: DrfTool, scopes: Iterable[str]) -> Tool:
        return self.register(
            item.fn,
            name=item.name,
            description=item.description,
            input_schema=item.input_schema,
            output_schema=item.output_schema,
            annotations=item.annotations,
            scopes=scopes,
        )

    def tool(self, fn: Callable[..., Any] | None = None, /, **options: Any) -> Any:
        """Decorator form of :meth:`register`: ``@registry.tool`` or ``@registry.tool(scopes=[...])``.

        Returns the function unchanged (it stays directly callable).
        """
        return self._decorate(fn, options)


#: The default registry (``MCP_OAUTH["TOOL_REGISTRY"] = "mcp_oauth.mcp_server.tools.registry"``).
registry = ToolRegistry()

#: ``@tool`` / ``@tool(name=..., scopes=[...])`` on the default :data:`registry`.
tool = registry.tool
