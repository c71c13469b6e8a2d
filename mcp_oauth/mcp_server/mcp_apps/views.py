"""What a tool declares for its view (``ui=``), and the ``_meta.ui`` objects the extension defines
(MCP Apps, SEP-1865 "UI Resource Format", "Resource Discovery", "Client<>Server Capability
Negotiation").

* a tool carries ``_meta.ui = {"resourceUri": "ui://…", "visibility": [...]}`` when the client
  declared the extension (``capabilities.extensions["io.modelcontextprotocol/ui"].mimeTypes``
  listing ``text/html;profile=mcp-app``); a client without it sees the tool without its view, and
  not at all when the tool is for apps only (``visibility: ["app"]``);
* the ``ui://`` resource carries ``_meta.ui = {"csp": {...}, "prefersBorder": ...}``: the origins
  the page may reach, declared with the view and overridable per resource by the
  ``MCP_OAUTH["APPS_CSP"]`` setting.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp_oauth.mcp_server.transport.extensions import client_extension
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "CSP_KEYS",
    "EXTENSION",
    "MIME_TYPE",
    "VISIBILITIES",
    "AppView",
    "as_view",
    "check_csp",
    "check_visibility",
    "client_supports_apps",
    "view_uri",
]

#: The extension's identifier (SEP-1865 "Extension Identifier").
EXTENSION = "io.modelcontextprotocol/ui"
#: The MIME type of a view's resource (SEP-1865 "Content Requirements": MUST).
MIME_TYPE = "text/html;profile=mcp-app"
#: ``_meta.ui.csp`` keys (SEP-1865 ``McpUiResourceCsp``).
CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
#: ``_meta.ui.visibility`` values (SEP-1865 "Visibility").
VISIBILITIES = ("model", "app")

#: An origin a CSP source list may name: ``scheme://host[:port]``, ``*.`` allowed as the host's first label.
_ORIGIN_RE = re.compile(
    r"^(https|http|wss|ws)://(\*\.)?([A-Za-z0-9-]+\.)*[A-Za-z0-9-]+(:[0-9]{1,5})?$|"
    r"^(https|http|wss|ws)://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$"
)
_URI_RE = re.compile(r"^ui://[A-Za-z0-9._~-]+(/[A-Za-z0-9._~/-]*)?$")


def check_csp(csp: Mapping[str, Any] | None, what: str) -> dict[str, tuple[str, ...]]:
    """``csp`` as ``{key: (origin, ...)}`` (keys of :data:`CSP_KEYS` only, empty lists dropped).

    Each entry is an origin (``https://cdn.example.com``, ``https://*.example.com``,
    ``wss://live.example.com:8443``): no path, no quote, no wildcard alone, so a declared value
    can never loosen the host's policy beyond that origin (SEP-1865 "Host Behavior": no loosening).

    :raises ValueError: an unknown key, a value that is not a list of origins.
    """
    if csp is None:
        return {}
    if not isinstance(csp, Mapping):
        raise ValueError(f"{what}: the CSP must be a mapping of {', '.join(CSP_KEYS)}")
    checked: dict[str, tuple[str, ...]] = {}
    for key, origins in csp.items():
        if key not in CSP_KEYS:
            raise ValueError(f"{what}: unknown CSP key {key!r} (one of {', '.join(CSP_KEYS)})")
        if isinstance(origins, str) or not isinstance(origins, Iterable):
            raise ValueError(f"{what}: CSP {key} must be a list of origins")
        values = tuple(dict.fromkeys(origins))
        for origin in values:
            if not isinstance(origin, str) or not _ORIGIN_RE.match(origin):
                raise ValueError(f"{what}: CSP {key} entry {origin!r} is not an origin (scheme://host[:port])")
        if values:
            checked[key] = values
    return checked


def view_uri(template: str) -> str:
    """The default ``ui://`` URI of a template: ``"notes/app.html"`` -> ``"ui://notes/app"``."""
    path = template[:-5] if template.endswith(".html") else template
    return "ui://" + path.strip("/")


@dataclass(frozen=True)
class AppView:
    """A tool's view: a Django template served as the ``ui://`` resource ``uri``.

    :param template: the template's name (``"notes/notes_app.html"``), rendered at each
        ``resources/read`` with the token's user (see :mod:`.resources`).
    :param uri: the resource's URI; default ``ui://`` + the template's name without ``.html``.
    :param name: / ``title`` / ``description``: the resource's entry in ``resources/list``.
    :param csp: ``{"connectDomains": [...], "resourceDomains": [...], "frameDomains": [...],
        "baseUriDomains": [...]}``: the origins the page may reach (none by default); the
        ``MCP_OAUTH["APPS_CSP"]`` entry of ``uri`` replaces a key it names.
    :param prefers_border: ``_meta.ui.prefersBorder`` (None: the host decides).
    :param context: ``fn(ctx) -> dict`` adding variables to the template's context (run in a
        worker thread like a sync view; the ORM is fine), or None.
    :param scopes: scopes a token needs to list and read the resource.
    :raises ValueError: a malformed URI or CSP.
    """

    template: str
    uri: str = ""
    name: str | None = None
    title: str | None = None
    description: str | None = None
    csp: Mapping[str, Any] | None = None
    prefers_border: bool | None = None
    context: Callable[..., Mapping[str, Any]] | None = field(default=None, compare=False)
    scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.template, str) or not self.template.strip():
            raise ValueError("an app view needs a template name")
        if not self.uri:
            object.__setattr__(self, "uri", view_uri(self.template))
        if not _URI_RE.match(self.uri):
            raise ValueError(f"app view URI {self.uri!r}: a ui:// URI of letters, digits and ._~-/ (SEP-1865)")
        object.__setattr__(self, "csp", check_csp(self.csp, f"app view {self.uri!r}"))
        object.__setattr__(self, "scopes", tuple(self.scopes))

    def effective_csp(self) -> dict[str, list[str]]:
        """The declared CSP with the ``MCP_OAUTH["APPS_CSP"]`` entry of :attr:`uri` over it (a key
        the setting names replaces the declared one; an empty list there removes it)."""
        merged: dict[str, tuple[str, ...]] = dict(self.csp or {})
        configured = (mcp_oauth_settings.APPS_CSP or {}).get(self.uri)
        if configured is not None:
            for key in configured:
                merged.pop(key, None)
            merged.update(check_csp(configured, f"MCP_OAUTH['APPS_CSP'][{self.uri!r}]"))
        return {key: list(merged[key]) for key in CSP_KEYS if merged.get(key)}

    def resource_meta(self) -> dict[str, Any]:
        """``_meta`` of the resource's entry and contents: ``{"ui": {"csp": ..., "prefersBorder": ...}}``."""
        ui: dict[str, Any] = {"csp": self.effective_csp()}
        if self.prefers_border is not None:
            ui["prefersBorder"] = self.prefers_border
        return {"ui": ui}


def as_view(ui: AppView | str | Mapping[str, Any]) -> AppView:
    """``ui=`` of a tool as an :class:`AppView`: an instance, a template name, or its keyword arguments.

    :raises ValueError: anything else, or what :class:`AppView` refuses.
    """
    if isinstance(ui, AppView):
        return ui
    if isinstance(ui, str):
        return AppView(template=ui)
    if isinstance(ui, Mapping):
        try:
            return AppView(**dict(ui))
        except TypeError as exc:
            raise ValueError(f"ui: {exc}") from None
    raise ValueError("ui must be an AppView, a template name or a mapping of AppView's arguments")


def check_visibility(visibility: Iterable[str] | None, what: str) -> tuple[str, ...] | None:
    """``visibility`` as a tuple of :data:`VISIBILITIES` (None: not declared, the spec's default
    ``["model", "app"]``). :raises ValueError: empty, or an unknown value."""
    if visibility is None:
        return None
    values = tuple(dict.fromkeys([visibility] if isinstance(visibility, str) else visibility))
    if not values or any(value not in VISIBILITIES for value in values):
        raise ValueError(f"{what}: visibility must be a non-empty list of 'model' and 'app'")
    return values


def client_supports_apps(client_capabilities: Mapping[str, Any]) -> bool:
    """Whether the client declared the extension with :data:`MIME_TYPE` among its ``mimeTypes``
    (SEP-1865 "Client (Host) Capabilities": ``mimeTypes`` is required)."""
    settings = client_extension(client_capabilities, EXTENSION)
    if settings is None:
        return False
    mime_types = settings.get("mimeTypes")
    return isinstance(mime_types, list) and MIME_TYPE in mime_types
