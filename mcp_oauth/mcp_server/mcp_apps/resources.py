"""The ``ui://`` resource of an :class:`~.views.AppView`: its template rendered for the token's user
(SEP-1865 "UI Resource Format": ``text/html;profile=mcp-app``, ``_meta.ui.csp``).

The template is rendered **without a request**: its context is what the MCP token stands for, never
the browser's session. The page runs in the host's sandboxed frame, on an origin that is not the
site's, so a session cookie or CSRF token would be both useless there and a leak. The context:

============== =========================================================================
``user``       the token's user (None for a client-credentials token)
``organization`` the :class:`~mcp_oauth.models.Organization` the request acts for, or None
``client_id``  the OAuth client's id
``scopes``     the token's scopes, sorted
``mcp_app``    ``{"uri": <ui:// URI>, "template": <template name>}``
(yours)        what the view's ``context(ctx)`` returns, over the above
============== =========================================================================

Context processors do not run (there is no request), ``{% csrf_token %}`` renders nothing, and
autoescaping is on as everywhere in Django: data interpolated into the page is HTML-escaped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as types
from django.template.loader import get_template

from mcp_oauth.mcp_server.mcp_apps.views import MIME_TYPE, AppView
from mcp_oauth.mcp_server.registry.base import call
from mcp_oauth.mcp_server.registry.contents import Contents
from mcp_oauth.mcp_server.registry.context import RequestContext
from mcp_oauth.mcp_server.registry.items import Resource
from mcp_oauth.mcp_server.registry.resources import ResourceRegistry

__all__ = ["AppResource", "app_views", "register_view", "render_view"]


def render_view(view: AppView, ctx: RequestContext) -> str:
    """The HTML of ``view`` for ``ctx`` (sync: templates may query the database).

    :raises TemplateDoesNotExist | TemplateSyntaxError: the template is missing or broken.
    """
    context: dict[str, Any] = {
        "user": ctx.user,
        "organization": ctx.organization,
        "client_id": ctx.client_id,
        "scopes": sorted(ctx.scopes),
        "mcp_app": {"uri": view.uri, "template": view.template},
    }
    if view.context is not None:
        context.update(view.context(ctx))
    return get_template(view.template).render(context)


@dataclass(eq=False)
class AppResource(Resource):
    """A ``ui://`` resource serving :attr:`view` (the entry and the contents carry its ``_meta.ui``,
    read from the settings at each list and read)."""

    view: AppView | None = None

    def definition(self) -> types.Resource:
        assert self.view is not None
        entry = super().definition()
        return entry.model_copy(update={"meta": {**(self.meta or {}), **self.view.resource_meta()}})

    async def read(self, ctx: RequestContext, uri: str) -> list[Contents]:
        """The rendered page as one ``text`` entry with ``_meta.ui``. :raises McpError: too large."""
        assert self.view is not None
        html = await call(render_view, self.view, ctx)
        contents = self.finish(uri, html)
        return [item.model_copy(update={"meta": self.view.resource_meta()}) for item in contents]


def register_view(view: AppView, resources: ResourceRegistry) -> AppResource:
    """Register ``view``'s resource in ``resources`` once; another tool declaring the same view
    (same URI and template) shares it.

    :raises ValueError: the URI is taken by another resource or another template.
    """
    existing = resources.get_resource(view.uri)
    if existing is not None:
        if isinstance(existing, AppResource) and existing.view is not None and existing.view.template == view.template:
            return existing
        raise ValueError(f"the resource {view.uri!r} is already registered for something else")
    item = AppResource(
        name=view.name or view.uri.removeprefix("ui://"),
        title=view.title,
        description=view.description,
        mime_type=MIME_TYPE,
        scopes=view.scopes,
        uri=view.uri,
        view=view,
    )
    resources.add(item)
    return item


def app_views(resources: ResourceRegistry) -> list[AppView]:
    """The views registered in ``resources``, in registration order."""
    return [item.view for item in resources.resources() if isinstance(item, AppResource) and item.view is not None]
