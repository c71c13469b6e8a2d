"""The server capabilities (mcp_oauth.mcp_server.transport.capabilities) as server/discover announces them in the 2026-07-28 era."""

from __future__ import annotations

from mcp_oauth.models import McpSession
from tests.mcp_oauth.mcp_server.transport.test_modern import (  # noqa: F401 - fixtures
    ACCEPT,
    ALL_VERSIONS,
    FULL_CAPS,
    V,
    _registry,
    body,
    envelope,
    headers,
    post,
    result_of,
    token,
)


def test_server_discover(client, token, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "SERVER_NAME": "acme",
        "SERVER_VERSION": "7.1",
        "INSTRUCTIONS": "Be nice.",
    }
    result = result_of(post(client, token, body("server/discover")))
    assert result == {
        "supportedVersions": ALL_VERSIONS,
        "capabilities": {
            "tools": {"listChanged": True},
            "logging": {},
            # the demo project's resources and prompts (mcp_oauth.mcp_server.registry)
            "prompts": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "completions": {},
            # the Tasks extension (mcp_oauth.mcp_server.mcp_tasks), the Skills extension (the demo
            # project's project/mcp_skills/: mcp_oauth.mcp_server.skills)
            "extensions": {
                "io.modelcontextprotocol/tasks": {},
                "io.modelcontextprotocol/skills": {"directoryRead": True},
                "io.modelcontextprotocol/oauth-client-credentials": {},
                "io.modelcontextprotocol/enterprise-managed-authorization": {},
                # MCP Apps: the demo project's notes view (mcp_oauth.mcp_server.mcp_apps)
                "io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]},
            },
        },
        "instructions": "Be nice.",
        "resultType": "complete",
        "ttlMs": 60000,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "acme", "version": "7.1"}},
    }
    assert not McpSession.objects.exists()
