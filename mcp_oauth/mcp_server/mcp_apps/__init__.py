"""MCP Apps (extension ``io.modelcontextprotocol/ui``, SEP-1865): a tool's interactive view, an HTML
page rendered from a Django template and served as a ``ui://`` resource.

* :mod:`.views` — :class:`AppView` (what a tool declares with ``ui=``), the extension's constants,
  ``_meta.ui`` of a tool and of a resource, the CSP domains' checks, the client's declaration;
* :mod:`.resources` — :class:`AppResource`, the ``ui://`` resource rendering the template for the
  token's user (``resources/list``, ``resources/read``), and its registration.

The template tags authors use (``{% load mcp_app %}``: the postMessage bridge, inlined static
files) are in :mod:`mcp_oauth.templatetags.mcp_app`; ``docs/how-to/mcp-apps.md`` is the guide.
"""

from __future__ import annotations

from mcp_oauth.mcp_server.mcp_apps.views import EXTENSION, MIME_TYPE, AppView, as_view, client_supports_apps

__all__ = ["EXTENSION", "MIME_TYPE", "AppView", "as_view", "client_supports_apps"]
