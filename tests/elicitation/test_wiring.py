"""MCP_OAUTH["TASKS_RESULT_CIPHER"]: mcp_oauth names no elicitation cipher; the elicitation app plugs
its own in from ready() when the site sets none (issue 29)."""

from __future__ import annotations

import base64
import json

from django.apps import apps
from django.core.checks import run_checks

import elicitation.crypto
from elicitation.wiring import wire
from mcp_oauth.mcp_server.mcp_tasks.policy import TaskPolicy
from mcp_oauth.mcp_server.tools import ToolRegistry
from mcp_oauth.settings import DEFAULTS, MCPOAuthSettings, mcp_oauth_settings


def test_mcp_oauth_defaults_to_no_cipher_of_elicitation():
    assert DEFAULTS["TASKS_RESULT_CIPHER"] is None
    fresh = MCPOAuthSettings()  # no app plugged anything into this one
    assert fresh.TASKS_RESULT_CIPHER is None


def test_the_elicitation_app_plugs_its_cipher_in_when_the_site_sets_none(settings):
    assert apps.is_installed("elicitation")
    settings.MCP_OAUTH = {k: v for k, v in settings.MCP_OAUTH.items() if k != "TASKS_RESULT_CIPHER"}
    assert mcp_oauth_settings.TASKS_RESULT_CIPHER is elicitation.crypto
    assert mcp_oauth_settings.configured("TASKS_RESULT_CIPHER") == "elicitation.crypto"
    sealed = mcp_oauth_settings.TASKS_RESULT_CIPHER.encrypt(json.dumps({"n": 1}))
    assert sealed != '{"n": 1}' and json.loads(elicitation.crypto.decrypt(sealed)) == {"n": 1}


class SiteCipher:
    """A site's own cipher (base64: reversible, enough to tell whose cipher ran)."""

    def encrypt(self, value: str) -> str:
        return base64.b64encode(value.encode()).decode()

    def decrypt(self, token: str) -> str:
        return base64.b64decode(token).decode()


SITE_CIPHER = SiteCipher()


def test_a_site_cipher_wins_over_the_plugged_one_and_wiring_again_changes_nothing(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TASKS_RESULT_CIPHER": "tests.elicitation.test_wiring.SITE_CIPHER"}
    assert mcp_oauth_settings.TASKS_RESULT_CIPHER is SITE_CIPHER
    wire()  # ready() run again (a second AppConfig.ready in tests): same default, site still wins
    assert mcp_oauth_settings.TASKS_RESULT_CIPHER is SITE_CIPHER
    settings.MCP_OAUTH = {k: v for k, v in settings.MCP_OAUTH.items() if k != "TASKS_RESULT_CIPHER"}
    assert mcp_oauth_settings.TASKS_RESULT_CIPHER is elicitation.crypto  # survives the reload


#: A registry with one task tool that keeps its result encrypted.
REGISTRY = ToolRegistry()


@REGISTRY.tool(task=TaskPolicy("optional", encrypt_result=True))
def sealed() -> dict:
    return {"secret": "s3cr3t"}


def _cipher_errors() -> list[str]:
    return [message.id for message in run_checks() if message.id == "mcp_oauth.E093"]


def test_a_site_without_elicitation_gets_e093_for_an_encrypting_tool(settings, monkeypatch):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_REGISTRY": "tests.elicitation.test_wiring.REGISTRY"}
    assert _cipher_errors() == []  # elicitation's cipher is plugged in
    monkeypatch.setattr(mcp_oauth_settings, "defaults", DEFAULTS)  # as if elicitation were not installed
    mcp_oauth_settings.reload()
    assert mcp_oauth_settings.TASKS_RESULT_CIPHER is None
    assert _cipher_errors() == ["mcp_oauth.E093"]
    monkeypatch.undo()
    mcp_oauth_settings.reload()
    assert mcp_oauth_settings.TASKS_RESULT_CIPHER is elicitation.crypto
