"""The paths of the organizations' own MCP endpoints: ``<MCP_PATH>/o/<slug>`` (issue 31).

Imports no model: the MCP lane (:mod:`mcp_oauth.mcp_server.transport.asgi`), imported by a site's
``asgi.py`` before Django is set up, asks :func:`is_organization_endpoint_path` which paths it serves.
"""

from __future__ import annotations

import functools
import re

from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["ORGANIZATION_SEGMENT", "endpoint_path", "is_organization_endpoint_path", "path_pattern"]

#: The path segment between ``MCP_PATH`` and an organization's slug.
ORGANIZATION_SEGMENT = "o"

#: What a slug looks like in a URL (Django's ``SlugField``: letters, digits, ``-`` and ``_``).
_SLUG = r"[-a-zA-Z0-9_]{1,100}"


def endpoint_path(slug: str) -> str:
    """``<MCP_PATH>/o/<slug>``: the path of an organization's endpoint."""
    return f"{str(mcp_oauth_settings.MCP_PATH).rstrip('/')}/{ORGANIZATION_SEGMENT}/{slug}"


def path_pattern(*, leading_slash: bool = True) -> str:
    """The anchored regular expression of the organizations' endpoint paths (a final ``/``
    allowed, as for ``MCP_PATH``); without the leading ``/`` for a URLconf's ``re_path``."""
    prefix = str(mcp_oauth_settings.MCP_PATH).strip("/")
    body = rf"{re.escape(prefix)}/{ORGANIZATION_SEGMENT}/{_SLUG}/?$"
    return ("^/" if leading_slash else "^") + body


@functools.lru_cache(maxsize=8)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def is_organization_endpoint_path(path: str) -> bool:
    """Whether ``path`` is ``<MCP_PATH>/o/<slug>`` (or with a final ``/``): a path the MCP lane
    serves (the resource registry then says whether that endpoint exists)."""
    return _compiled(path_pattern()).match(path) is not None
