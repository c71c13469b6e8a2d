"""System checks of the metrics settings (``mcp_oauth.E135``, ``mcp_oauth.W136``); registered on import
by :mod:`mcp_oauth.wiring`."""

from __future__ import annotations

import importlib.util
from typing import Any

from django.core.checks import Error, Warning, register

from mcp_oauth.observability.metrics_view import parse_networks
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["check_metrics_settings"]


@register()
def check_metrics_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E135: a malformed metrics setting, or metrics on without ``prometheus_client`` installed.
    W136: metrics on, every address allowed and no bearer token (anyone may read them)."""
    if not mcp_oauth_settings.METRICS_ENABLED:
        return []
    problems: list[Any] = []
    if importlib.util.find_spec("prometheus_client") is None:
        problems.append(
            Error(
                "METRICS_ENABLED is on but prometheus_client is not installed.",
                hint="Install the metrics extra: pip install 'django-mcp-authz[metrics]'.",
                id="mcp_oauth.E135",
            )
        )
    networks = mcp_oauth_settings.METRICS_ALLOWED_NETWORKS
    if networks is not None and not isinstance(networks, (list, tuple)):
        problems.append(Error("METRICS_ALLOWED_NETWORKS must be a list of CIDR strings.", id="mcp_oauth.E135"))
    else:
        try:
            parse_networks(tuple(networks or ()))
        except ValueError as exc:
            problems.append(Error(f"METRICS_ALLOWED_NETWORKS: {exc}.", id="mcp_oauth.E135"))
    path = mcp_oauth_settings.METRICS_PATH
    if path is not None and (not isinstance(path, str) or not path.startswith("/")):
        problems.append(Error("METRICS_PATH must be a path starting with / (or None).", id="mcp_oauth.E135"))
    if not networks and not mcp_oauth_settings.METRICS_BEARER_TOKEN:
        problems.append(
            Warning(
                "The metrics endpoint is open to every address without a token.",
                hint="Set METRICS_ALLOWED_NETWORKS or METRICS_BEARER_TOKEN (docs/how-to/metrics.md).",
                id="mcp_oauth.W136",
            )
        )
    return problems
