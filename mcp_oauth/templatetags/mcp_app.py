"""Template tags for MCP Apps views (``ui=`` of a tool): ``{% load mcp_app %}``.

* ``{% mcp_app_bridge name="Notes" version="1.0" %}`` — the page's side of the postMessage protocol
  (SEP-1865 "Communication Protocol"), as one inline ``<script>``: it sends ``ui/initialize`` and
  ``ui/notifications/initialized``, answers ``ping`` and ``ui/resource-teardown``, reports its size
  (``ui/notifications/size-changed``) and gives the page ``window.mcpApp``:

  ==================================== ================================================================
  ``mcpApp.ready``                     a Promise of the ``ui/initialize`` result (``hostContext``, ...)
  ``mcpApp.callTool(name, args)``      ``tools/call`` through the host: a Promise of the
                                       ``CallToolResult`` (``isError: true`` resolves; a JSON-RPC error
                                       rejects with an ``Error`` carrying ``code`` and ``data``)
  ``mcpApp.readResource(uri)``         ``resources/read`` through the host
  ``mcpApp.sendMessage(text)``         ``ui/message`` (a user message in the conversation)
  ``mcpApp.openLink(url)``             ``ui/open-link``
  ``mcpApp.updateModelContext(p)``     ``ui/update-model-context``
  ``mcpApp.log(level, data)``          ``notifications/message``
  ``mcpApp.on(event, fn)``             ``"tool-input"``, ``"tool-input-partial"``, ``"tool-result"``,
                                       ``"tool-cancelled"``, ``"host-context-changed"``, ``"teardown"``;
                                       a late listener of ``tool-input`` / ``tool-result`` gets the last
                                       one at once
  ==================================== ================================================================

  The script is the template ``mcp_oauth/mcp_app/bridge.html`` (override it like any template).
* ``{% mcp_app_static "notes/app.css" %}`` — a static file's content inlined: ``.css`` in a
  ``<style>``, ``.js`` in a ``<script>``; anything else is refused. Found with the staticfiles
  finders, else read from the static files storage (after ``collectstatic``). A view's page is
  rendered into the host's frame: it cannot load the site's ``/static/`` URLs unless their origin
  is declared in the view's ``resourceDomains``.
* ``{% mcp_app_data_uri "notes/logo.png" %}`` — a static file as a ``data:`` URI (for ``<img src>``;
  ``img-src data:`` is in the host's default policy).

For data, Django's ``{{ value|json_script:"id" }}`` puts a JSON value in the page safely.
"""

from __future__ import annotations

import base64
import mimetypes
import re

from django import template
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import staticfiles_storage
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

_SCRIPT_END = re.compile(r"</(script)", re.IGNORECASE)
_STYLE_END = re.compile(r"</style", re.IGNORECASE)


def _read_static(path: str) -> bytes:
    """The bytes of the static file ``path``.

    :raises template.TemplateSyntaxError: no such static file (the view's read answers an internal
        error, the template's author sees the path).
    """
    if not isinstance(path, str) or not path or ".." in path.split("/"):
        raise template.TemplateSyntaxError(f"mcp_app: invalid static path {path!r}")
    found = finders.find(path)
    if isinstance(found, list):
        found = found[0] if found else None
    if found:
        with open(found, "rb") as handle:
            return handle.read()
    try:
        with staticfiles_storage.open(path, "rb") as handle:
            return handle.read()
    except (FileNotFoundError, OSError, ValueError):
        raise template.TemplateSyntaxError(f"mcp_app: static file {path!r} not found") from None


@register.simple_tag
def mcp_app_static(path: str) -> SafeString:
    """``path``'s content in a ``<style>`` (``.css``) or ``<script>`` (``.js``).

    :raises template.TemplateSyntaxError: another type, a missing file, a stylesheet containing
        ``</style`` (it would end the element).
    """
    text = _read_static(path).decode("utf-8")
    if path.endswith(".css"):
        if _STYLE_END.search(text):
            raise template.TemplateSyntaxError(f"mcp_app: {path!r} contains </style")
        return mark_safe(f"<style>{text}</style>")
    if path.endswith(".js"):
        # "<\/script" is the same string in JavaScript and cannot end the element
        body = _SCRIPT_END.sub(r"<\\/\1", text)
        return mark_safe(f"<script>{body}</script>")
    raise template.TemplateSyntaxError(f"mcp_app: only .css and .js files can be inlined, not {path!r}")


@register.simple_tag
def mcp_app_data_uri(path: str) -> str:
    """``data:<type>;base64,...`` of the static file ``path`` (autoescaped like any value)."""
    mime_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
    return f"data:{mime_type};base64,{base64.b64encode(_read_static(path)).decode('ascii')}"


@register.simple_tag
def mcp_app_bridge(name: str = "MCP App", version: str = "1.0.0") -> SafeString:
    """The bridge ``<script>`` (see the module docstring); ``name``/``version`` are the
    ``appInfo`` of ``ui/initialize``."""
    return mark_safe(render_to_string("mcp_oauth/mcp_app/bridge.html", {"name": name, "version": version}))
