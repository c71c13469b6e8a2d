"""The method table (mcp_oauth.mcp_server.transport.table): an unknown method is -32601."""

from __future__ import annotations

import pytest

from tests.mcp_oauth.mcp_server.transport.test_views import (  # noqa: F401 - fixtures
    ACCEPT_BOTH,
    INIT_PARAMS,
    _registry,
    client,
    error_of,
    initialize,
    mcp_headers,
    post,
    request,
    token,
)


@pytest.mark.parametrize("method", ["resources/lists", "prompts/delete", "tasks/list", "sampling/createMessage"])
def test_unknown_methods_are_32601(client, token, method):
    session_id = initialize(client, token)
    response = post(client, request(method, {}), token, session_id)
    assert response.status_code == 200
    assert error_of(response)["code"] == -32601
