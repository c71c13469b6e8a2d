"""The 2025-11-25 handshake family (mcp_oauth.mcp_server.transport.legacy): initialize, version negotiation, server info, notifications, ping, logging/setLevel."""

from __future__ import annotations

import pytest

from mcp_oauth.models import McpSession
from mcp_oauth.signals import mcp_session_started
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
    result_of,
    token,
)


def test_initialize_creates_a_bound_session(client, token, user, public_app, resource):
    started = []
    mcp_session_started.connect(lambda **kw: started.append(kw["session"].pk), weak=False, dispatch_uid="t-start")
    try:
        response = post(client, request("initialize", INIT_PARAMS, id="init-1"), token)
    finally:
        mcp_session_started.disconnect(dispatch_uid="t-start")
    body = response.json()
    assert body["id"] == "init-1"
    assert body["result"] == {
        "protocolVersion": "2025-11-25",
        "capabilities": {
            "tools": {"listChanged": False},
            "logging": {},
            # the demo project's resources and prompts (project/mcp_resources.py, mcp_prompts.py)
            "resources": {"subscribe": True, "listChanged": True},
            "prompts": {"listChanged": True},
            "completions": {},
            # the ext-auth extensions this server offers in both eras (not Tasks: 2026-07-28 only),
            # and Skills (the demo project's project/mcp_skills/)
            "extensions": {
                "io.modelcontextprotocol/oauth-client-credentials": {},
                "io.modelcontextprotocol/enterprise-managed-authorization": {},
                # MCP Apps: the demo project's notes view (mcp_oauth.mcp_server.mcp_apps)
                "io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]},
                "io.modelcontextprotocol/skills": {"directoryRead": True},
            },
        },
        "serverInfo": {"name": "django-mcp-authz", "version": "0.1.0"},
    }
    session = McpSession.objects.get(pk=response["Mcp-Session-Id"])
    assert (session.user, session.application, session.resource) == (user, public_app, resource)
    assert session.protocol_version == "2025-11-25"
    assert session.client_capabilities == INIT_PARAMS["capabilities"]
    assert session.client_info == INIT_PARAMS["clientInfo"]
    assert len(session.pk) >= 43 and started == [session.pk]


@pytest.mark.parametrize(
    ("offered", "negotiated"),
    [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", "2024-11-05"),
        ("2026-07-28", "2025-11-25"),
        ("2099-01-01", "2025-11-25"),
    ],
)
def test_version_negotiation(client, token, offered, negotiated):
    response = post(client, request("initialize", {**INIT_PARAMS, "protocolVersion": offered}), token)
    assert result_of(response)["protocolVersion"] == negotiated
    assert McpSession.objects.get(pk=response["Mcp-Session-Id"]).protocol_version == negotiated


def test_server_info_and_instructions_come_from_settings(client, token, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "SERVER_NAME": "acme",
        "SERVER_VERSION": "7.1",
        "INSTRUCTIONS": "Be nice.",
    }
    result = result_of(post(client, request("initialize", INIT_PARAMS), token))
    assert result["serverInfo"] == {"name": "acme", "version": "7.1"}
    assert result["instructions"] == "Be nice."


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"protocolVersion": "2025-11-25"},
        {**INIT_PARAMS, "clientInfo": {"version": "1"}},
        {**INIT_PARAMS, "capabilities": []},
    ],
)
def test_initialize_with_invalid_params_is_32602(client, token, params):
    response = post(client, request("initialize", params), token)
    assert response.status_code == 200
    assert error_of(response)["code"] == -32602
    assert "Mcp-Session-Id" not in response
    assert not McpSession.objects.exists()


def test_initialized_notification_is_202(client, token):
    session_id = initialize(client, token)
    response = post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, session_id)
    assert response.status_code == 202 and response.content == b""


def test_client_responses_and_unknown_notifications_are_202(client, token):
    session_id = initialize(client, token)
    for message in (
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1, {"x": 2}]}},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}, "reason": 5}},
        {"jsonrpc": "2.0", "id": "srv-1", "result": {}},
        {"jsonrpc": "2.0", "id": "srv-2", "error": {"code": -1, "message": "declined"}},
    ):
        response = post(client, message, token, session_id)
        assert response.status_code == 202 and response.content == b""


def test_ping(client, token):
    session_id = initialize(client, token)
    response = post(client, request("ping", id="p"), token, session_id)
    assert response.json() == {"jsonrpc": "2.0", "id": "p", "result": {}}


def test_logging_set_level(client, token):
    session_id = initialize(client, token)
    assert result_of(post(client, request("logging/setLevel", {"level": "warning"}), token, session_id)) == {}
    assert McpSession.objects.get(pk=session_id).log_level == "warning"
    response = post(client, request("logging/setLevel", {"level": "loud"}), token, session_id)
    assert error_of(response)["code"] == -32602
