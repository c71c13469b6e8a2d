"""The MCP_OAUTH defaults (mcp_oauth.defaults): the one dict the settings object reads, re-exported
by mcp_oauth.settings; every dotted-path setting among its keys."""

from __future__ import annotations

from mcp_oauth import defaults, settings
from mcp_oauth.settings import MCPOAuthSettings


def test_settings_re_exports_the_same_objects():
    assert settings.DEFAULTS is defaults.DEFAULTS
    assert settings.IMPORT_STRINGS is defaults.IMPORT_STRINGS


def test_every_import_string_is_a_key():
    assert defaults.IMPORT_STRINGS <= set(defaults.DEFAULTS)
    assert defaults.DEFAULTS["TASKS_RESULT_CIPHER"] is None


def test_a_missing_key_falls_back_to_its_default(settings):
    settings.MCP_OAUTH = {"BASE_URL": "https://mcp.example.com"}
    fresh = MCPOAuthSettings()
    assert fresh.MCP_PATH == defaults.DEFAULTS["MCP_PATH"] == "/mcp"
    assert fresh.TOOL_CALL_AUDIT_BATCH_SIZE == 500
    assert fresh.BASE_URL == "https://mcp.example.com"
