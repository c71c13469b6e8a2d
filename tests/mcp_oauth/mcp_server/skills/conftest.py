"""Fixtures of the Skills extension tests: a folder of skills in ``SKILL_DIRS`` and a token for /mcp."""

from __future__ import annotations

import pytest

from tests.support.skills import write_folder_skill


@pytest.fixture
def skills_root(settings, tmp_path):
    """``SKILL_DIRS`` set to a temporary folder holding the skill ``team/guide``."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SKILL_DIRS": [str(tmp_path)]}
    write_folder_skill(tmp_path)
    return tmp_path


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, scope="mcp", resource=resource.uri)
