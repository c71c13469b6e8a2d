"""DRF views as tool definitions: one :class:`DrfTool` per ViewSet action or per APIView method,
ready for :meth:`~mcp_oauth.mcp_server.tools.ToolRegistry.register` (which
:meth:`~mcp_oauth.mcp_server.tools.ToolRegistry.drf_viewset` and ``drf_view`` call).

* **Name**: ``<basename>_<action>`` (``notes_list``, ``notes_partial_update``).
* **Description**: the action method's docstring, else a sentence from the action and the model's
  verbose name, followed by the view class's docstring.
* **Input schema**: the serializer's writable fields (:mod:`.schema`; an ``@action`` only with its own
  ``serializer_class=``, else any object); a detail action adds the lookup
  (``lookup_url_kwarg`` or ``lookup_field``, an integer for an integer key) as a required argument;
  ``list`` takes the query parameters its filter backends and paginator describe instead.
* **Output schema**: the serializer's readable fields; ``list``'s paginated envelope (or
  ``{"results": [...]}``); none for ``destroy``.
* **Annotations** from the HTTP method (MCP 2025-11-25 ``ToolAnnotations``): ``GET`` read-only;
  ``POST`` neither destructive nor idempotent; ``PUT`` destructive and idempotent; ``PATCH``
  destructive; ``DELETE`` destructive and idempotent; never open-world (the site's own data).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rest_framework.generics import GenericAPIView
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSetMixin

from mcp_oauth.mcp_server.drf_tools.invoke import Endpoint, ToolPrincipalAuthentication, run_endpoint
from mcp_oauth.mcp_server.drf_tools.schema import (
    input_schema,
    list_output_schema,
    lookup_schema,
    output_schema,
    query_parameters,
)
from mcp_oauth.mcp_server.transport.context import ToolContext

__all__ = ["STANDARD_ACTIONS", "DrfTool", "annotations_for", "view_tool", "viewset_tools"]

#: The router's actions: name -> (HTTP method, detail).
STANDARD_ACTIONS: dict[str, tuple[str, bool]] = {
    "list": ("get", False),
    "create": ("post", False),
    "retrieve": ("get", True),
    "update": ("put", True),
    "partial_update": ("patch", True),
    "destroy": ("delete", True),
}
_SENTENCES = {
    "list": "List the {plural} you may see.",
    "create": "Create a new {name}.",
    "retrieve": "Read one {name}.",
    "update": "Replace one {name} (every writable field).",
    "partial_update": "Change some fields of one {name}.",
    "destroy": "Delete one {name}.",
}
#: What a tool run as a view replaces: who calls (the token's principal), JSON in and out.
_TOOL_VIEW_OPTIONS = {
    "authentication_classes": [ToolPrincipalAuthentication],
    "parser_classes": [JSONParser],
    "renderer_classes": [JSONRenderer],
}


def annotations_for(method: str) -> dict[str, bool]:
    """The ``ToolAnnotations`` hints an HTTP method implies (RFC 9110 §9.2: safe and idempotent methods)."""
    method = method.lower()
    if method in ("get", "head", "options"):
        return {"readOnlyHint": True, "openWorldHint": False}
    return {
        "readOnlyHint": False,
        "destructiveHint": method in ("put", "patch", "delete"),
        "idempotentHint": method in ("put", "delete"),
        "openWorldHint": False,
    }


@dataclass(frozen=True)
class DrfTool:
    """What the registry registers for one action: ``fn(ctx, **arguments)`` runs the view."""

    name: str
    fn: Callable[..., Any]
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, bool]
    endpoint: Endpoint


def _runner(endpoint: Endpoint) -> Callable[..., Any]:
    def run(ctx: ToolContext, **arguments: Any) -> Any:
        return run_endpoint(ctx, endpoint, arguments)

    run.__name__ = endpoint.tool_name
    return run


def _doc(obj: Any) -> str:
    return inspect.cleandoc(obj.__doc__) if isinstance(getattr(obj, "__doc__", None), str) else ""


def _own_doc(cls: type, attribute: str) -> str:
    """The docstring of ``cls.<attribute>`` when the site wrote one (not DRF's mixins')."""
    for klass in cls.__mro__:
        if attribute in vars(klass):
            return "" if klass.__module__.startswith("rest_framework.") else _doc(vars(klass)[attribute])
    return ""


def _describe(cls: type, action: str, model: Any, description: str | None) -> str:
    if description is not None:
        return description
    own = _own_doc(cls, action)
    if not own and action in _SENTENCES:
        name = str(model._meta.verbose_name) if model is not None else "item"
        plural = str(model._meta.verbose_name_plural) if model is not None else "items"
        own = _SENTENCES[action].format(name=name, plural=plural)
    return "\n\n".join(
        part for part in (own, "" if cls.__module__.startswith("rest_framework.") else _doc(cls)) if part
    )


def _check_names(tool_name: str, properties: Mapping[str, Any], extra: Iterable[str]) -> None:
    clash = sorted(set(properties) & set(extra) | ({"ctx"} & (set(properties) | set(extra))))
    if clash:
        raise ValueError(f"tool {tool_name!r}: argument names used twice or reserved: {', '.join(clash)}")


def viewset_tools(
    viewset: type[ViewSetMixin],
    *,
    basename: str,
    actions: Iterable[str] | None = None,
    descriptions: Mapping[str, str] | None = None,
) -> list[DrfTool]:
    """One :class:`DrfTool` per action of ``viewset`` (default: the router actions it defines, then
    its ``@action`` methods).

    :param basename: the router's basename: tool names ``<basename>_<action>``, URL names
        ``<basename>-list`` / ``<basename>-detail`` (the view's request path when they reverse).
    :raises ValueError: not a ViewSet, an action it does not have, clashing argument names.
    """
    if not (isinstance(viewset, type) and issubclass(viewset, ViewSetMixin) and issubclass(viewset, APIView)):
        raise ValueError(f"{viewset!r} is not a DRF ViewSet class")
    extra: dict[str, Any] = {action.__name__: action for action in viewset.get_extra_actions()}
    available = [name for name in STANDARD_ACTIONS if hasattr(viewset, name)] + list(extra)
    chosen = list(actions) if actions is not None else available
    unknown = [name for name in chosen if name not in available]
    if unknown:
        raise ValueError(f"{viewset.__name__} has no action {', '.join(unknown)}")
    tools = []
    for action in chosen:
        if action in STANDARD_ACTIONS:
            method, detail = STANDARD_ACTIONS[action]
            initkwargs: dict[str, Any] = {}
            url_name = f"{basename}-{'detail' if detail else 'list'}"
        else:
            function = extra[action]
            method, detail = next(iter(function.mapping)), function.detail
            initkwargs = dict(function.kwargs)
            url_name = f"{basename}-{function.url_name}"
        tools.append(_viewset_tool(viewset, basename, action, method, detail, initkwargs, url_name, descriptions))
    return tools


def _viewset_tool(viewset, basename, action, method, detail, initkwargs, url_name, descriptions) -> DrfTool:
    tool_name = f"{basename}_{action}"
    probe = viewset(
        action=action, basename=basename, detail=detail, format_kwarg=None, kwargs={}, args=(), **initkwargs
    )
    serializer_class = _serializer_class(probe)
    model = getattr(getattr(probe, "queryset", None), "model", None)
    if model is None:  # get_queryset() only: the model serializer's model
        model = getattr(getattr(serializer_class, "Meta", None), "model", None)
    partial = action == "partial_update"
    properties: dict[str, Any]
    if method in ("get", "delete"):
        schema: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}
        if action == "list":
            paginator = getattr(probe, "paginator", None)
            backends = [backend() for backend in getattr(probe, "filter_backends", ())]
            schema["properties"] = query_parameters(probe, backends, paginator)
    elif action in STANDARD_ACTIONS or "serializer_class" in initkwargs:
        schema = input_schema(serializer_class(partial=partial)) if serializer_class else _open_object()
    else:  # an @action without a serializer of its own: the view's is a guess, any object goes on
        schema = _open_object()
    output = None
    if serializer_class is not None and action != "destroy":
        if action == "list":
            output = list_output_schema(serializer_class(), getattr(probe, "paginator", None))
        elif action in STANDARD_ACTIONS:
            output = output_schema(serializer_class())
    url_kwargs: tuple[str, ...] = ()
    if detail:
        lookup_field = getattr(viewset, "lookup_field", "pk")
        kwarg = getattr(viewset, "lookup_url_kwarg", None) or lookup_field
        properties = schema.setdefault("properties", {})
        _check_names(tool_name, properties, [kwarg])
        schema["properties"] = {kwarg: lookup_schema(model, lookup_field), **properties}
        schema["required"] = [kwarg, *schema.get("required", [])]
        url_kwargs = (kwarg,)
    _check_names(tool_name, schema.get("properties", {}), [])
    view = viewset.as_view({method: action}, basename=basename, detail=detail, **initkwargs, **_TOOL_VIEW_OPTIONS)
    endpoint = Endpoint.of(tool_name, view, method, url_kwargs=url_kwargs, url_name=url_name)
    description = _describe(viewset, action, model, (descriptions or {}).get(action))
    return DrfTool(tool_name, _runner(endpoint), description, schema, output, annotations_for(method), endpoint)


def _serializer_class(view: Any) -> Any:
    """The view's serializer class, when it can name one without a request (else None)."""
    if not isinstance(view, GenericAPIView):
        return getattr(view, "serializer_class", None)
    try:
        return view.get_serializer_class()
    except (AssertionError, AttributeError, TypeError):  # get_serializer_class() reading self.request
        return getattr(view, "serializer_class", None)


def _open_object() -> dict[str, Any]:
    return {"type": "object"}


def view_tool(
    view_class: type[APIView],
    *,
    method: str,
    name: str,
    description: str | None = None,
    serializer: Any = None,
    output_serializer: Any = None,
    url_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    url_name: str | None = None,
) -> DrfTool:
    """A :class:`DrfTool` for one HTTP method of an ``APIView``.

    :param serializer: the serializer of the arguments (default: a generic view's own; without
        one, any JSON object is passed on as the body or the query).
    :param output_serializer: the serializer of the answer (an ``outputSchema``; default: none).
    :param url_kwargs: URL keyword arguments the view takes: name -> JSON Schema (required arguments).
    :param url_name: the URL name reversed (with ``url_kwargs``) for the request path.
    :raises ValueError: not an APIView, a method it does not handle, clashing argument names.
    """
    method = method.lower()
    if not (isinstance(view_class, type) and issubclass(view_class, APIView)) or issubclass(view_class, ViewSetMixin):
        raise ValueError(f"{view_class!r} is not a DRF APIView class (publish a ViewSet with drf_viewset)")
    if not hasattr(view_class, method):
        raise ValueError(f"{view_class.__name__} does not handle {method.upper()}")
    serializer = serializer or _serializer_class(view_class(format_kwarg=None, kwargs={}, args=()))
    if serializer is not None:
        schema = input_schema(serializer(partial=method == "patch"))
        if method in ("get", "delete"):
            schema["required"] = [n for n in schema.get("required", []) if n in (url_kwargs or {})]
    else:
        schema = _open_object()
    kwargs = dict(url_kwargs or {})
    _check_names(name, schema.get("properties", {}), kwargs)
    if kwargs:
        schema["properties"] = {**{k: dict(v) for k, v in kwargs.items()}, **schema.get("properties", {})}
        schema["required"] = [*kwargs, *[n for n in schema.get("required", []) if n not in kwargs]]
    output = output_schema(output_serializer()) if output_serializer is not None else None
    view = view_class.as_view(**_TOOL_VIEW_OPTIONS)
    endpoint = Endpoint.of(name, view, method, url_kwargs=tuple(kwargs), url_name=url_name)
    text = description if description is not None else _own_doc(view_class, method) or _doc(view_class)
    return DrfTool(name, _runner(endpoint), text, schema, output, annotations_for(method), endpoint)
