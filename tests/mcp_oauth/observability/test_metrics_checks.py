"""The system checks of the metrics settings (mcp_oauth.observability.metrics_checks)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def test_system_checks(settings):
    from mcp_oauth.observability.metrics_checks import check_metrics_settings

    assert check_metrics_settings() == []  # off
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ENABLED": True}
    assert check_metrics_settings() == []  # loopback by default
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": ["10.0.0.0/33"]}
    assert [m.id for m in check_metrics_settings()] == ["mcp_oauth.E135"]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": []}
    assert [m.id for m in check_metrics_settings()] == ["mcp_oauth.W136"]
