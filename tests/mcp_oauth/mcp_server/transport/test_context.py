"""What a tool receives (mcp_oauth.mcp_server.transport.context): progress and log messages are dropped when the response is plain JSON."""

from __future__ import annotations

from tests.mcp_oauth.mcp_server.transport.test_views import (  # noqa: F401 - fixtures
    ACCEPT_BOTH,
    INIT_PARAMS,
    REGISTRY,
    _registry,
    client,
    initialize,
    mcp_headers,
    post,
    request,
    result_of,
    slow_steps,
    token,
)


def test_progress_and_logs_are_dropped_in_json_mode(client, token):
    session_id = initialize(client, token)
    response = post(
        client,
        request("tools/call", {"name": "slow_steps", "arguments": {"steps": 2}, "_meta": {"progressToken": 5}}),
        token,
        session_id,
    )
    assert response["Content-Type"] == "application/json"
    assert result_of(response)["content"][0]["text"] == "did 2 steps"
