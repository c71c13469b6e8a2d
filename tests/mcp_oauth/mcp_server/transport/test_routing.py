"""Era selection before the handler runs (mcp_oauth.mcp_server.transport.routing): the MCP-Protocol-Version header, modern requests on a session, the server/discover probe."""

from __future__ import annotations

import pytest

from mcp_oauth.models import McpSession
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

ALL_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


@pytest.mark.parametrize("version", ["2099-01-01", "garbage", ""])
def test_unsupported_protocol_version_header_is_400(client, token, version):
    session_id = initialize(client, token)
    response = post(client, request("ping"), token, session_id, **{"MCP-Protocol-Version": version})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"] == {"supported": ALL_VERSIONS, "requested": version}


def test_a_modern_version_header_on_a_session_request_is_served_as_modern(client, token):
    """MCP 2026-07-28: the era is chosen per request; a 2026-07-28 header without the
    ``_meta`` envelope is an invalid modern request (400 -32602), never a session request."""
    session_id = initialize(client, token)
    response = post(client, request("ping"), token, session_id, **{"MCP-Protocol-Version": "2026-07-28"})
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
def test_supported_protocol_version_headers(client, token, version):
    session_id = initialize(client, token)
    response = post(client, request("ping"), token, session_id, **{"MCP-Protocol-Version": version})
    assert result_of(response) == {}


def test_server_discover_probe_is_answered_without_a_session(client, token):
    """What the SDK sends first in mode="auto": no session, a 2026 version header and envelope."""
    params = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    response = post(
        client,
        request("server/discover", params),
        token,
        **{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
    )
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    result = response.json()["result"]
    assert result["supportedVersions"] == ALL_VERSIONS
    assert result["resultType"] == "complete"
    assert not McpSession.objects.exists()
