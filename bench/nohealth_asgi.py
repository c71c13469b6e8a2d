"""The reference site without :func:`mcp_oauth.health.health_lane` (bench only): the probes are
served by the URLconf views (``mcp_oauth.urls``) behind Django's middleware, and the MCP endpoint
without the health lane in front. ``bench/probes.py`` serves it next to ``project.asgi``."""

from __future__ import annotations

from project.asgi import application as _full  # first: sets Django up

__all__ = ["application"]

application = _full.app  # token_lane(mcp_lane(django)): what health_lane wraps
