"""The paths of the organizations' endpoints, as the MCP lane and the URLconf see them."""

from __future__ import annotations

import pytest

from mcp_oauth.mcp_server.transport.asgi import McpLane
from mcp_oauth.shared.organization_paths import endpoint_path, is_organization_endpoint_path, path_pattern


@pytest.mark.parametrize(
    ("path", "served"),
    [
        ("/mcp/o/acme", True),
        ("/mcp/o/acme/", True),
        ("/mcp/o/Acme_EU-2", True),
        ("/mcp/o/", False),
        ("/mcp/o/acme/x", False),
        ("/mcp/o/ac.me", False),
        ("/mcp/o/" + "a" * 101, False),
        ("/mcpo/acme", False),
        ("/other/o/acme", False),
    ],
)
def test_which_paths_are_organization_endpoints(path, served):
    assert is_organization_endpoint_path(path) is served
    lane = McpLane(app=None)
    assert lane.serves({"type": "http", "path": path}) is served


def test_the_paths_follow_mcp_path(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "MCP_PATH": "/api/mcp/"}
    assert endpoint_path("acme") == "/api/mcp/o/acme"
    assert path_pattern(leading_slash=False).startswith("^api/mcp/o/")
    assert is_organization_endpoint_path("/api/mcp/o/acme") and not is_organization_endpoint_path("/mcp/o/acme")
