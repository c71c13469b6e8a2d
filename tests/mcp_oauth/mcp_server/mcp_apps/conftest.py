"""Fixtures of the MCP Apps tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def token(resource, user, public_app, mint_token):
    """An access token of ``user`` for the site's MCP endpoint."""
    return mint_token(user, public_app, resource=resource.uri)
