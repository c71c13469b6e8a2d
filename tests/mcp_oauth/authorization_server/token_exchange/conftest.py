"""Fixtures of the token exchange tests (RFC 8693)."""

from __future__ import annotations

import pytest

from tests.support.token_exchange_helpers import allowing_adapter, api_resource


@pytest.fixture
def logged_in(client, user, resource):
    """The test client logged in as ``user``, with the reference site's API resource present."""
    api_resource()
    client.force_login(user)
    return client


@pytest.fixture
def allow_all(settings):
    """An adapter that allows every exchange that passed the grant's checks."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter()}
