"""Handlers of the 2025-11-25 handshake family (MCP 2025-11-25 "Lifecycle", "Utilities").

====================  =====================================================
method                result
====================  =====================================================
``initialize``        ``InitializeResult``; opens a session (Lifecycle). Versions 2025-11-25,
                      2025-06-18, 2025-03-26 and 2024-11-05 are negotiated: the client's
                      ``protocolVersion`` when supported, else the latest.
``ping``              ``{}`` (Utilities / Ping)
``logging/setLevel``  ``{}``; later ``notifications/message`` below it are not sent
====================  =====================================================

``initialize`` stores the session on ``call.session`` (the front end returns its id in the
``Mcp-Session-Id`` header).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.transport.capabilities import initialize_capabilities
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError
from mcp_oauth.mcp_server.transport.sessions import create_session, set_log_level
from mcp_oauth.mcp_server.transport.table import HANDSHAKE_VERSIONS, Call, parse_params, server_info
from mcp_oauth.models import McpSession
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.text import storable
from mcp_oauth.signals import mcp_session_started

__all__ = ["initialize", "ping", "set_level"]

LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]


async def initialize(call: Call) -> types.InitializeResult:
    """``initialize``: negotiate the version, store the client's capabilities and info on a new session."""
    call.protocol_version = LATEST_HANDSHAKE_VERSION
    params: types.InitializeRequestParams = parse_params(call)
    requested = params.protocol_version
    version = requested if requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE_VERSION
    capabilities = call.params.get("capabilities") or {}
    client_info = call.params.get("clientInfo") or {}
    if not (storable(capabilities) and storable(client_info)):
        raise McpError(INVALID_PARAMS, "Invalid params for initialize: capabilities or clientInfo hold invalid text")
    session = await sync_to_async(create_session)(
        call.principal, protocol_version=version, client_capabilities=capabilities, client_info=client_info
    )
    call.session = session
    call.protocol_version = version
    await mcp_session_started.asend(sender=McpSession, session=session)
    return types.InitializeResult(
        protocol_version=version,
        capabilities=initialize_capabilities(),
        server_info=types.Implementation.model_validate(server_info()),
        instructions=mcp_oauth_settings.INSTRUCTIONS or None,
    )


async def ping(call: Call) -> dict[str, Any]:
    """``ping``: ``{}``."""
    parse_params(call)
    return {}


async def set_level(call: Call) -> dict[str, Any]:
    """``logging/setLevel``: remember the minimum level for this session's ``notifications/message``."""
    params: types.SetLevelRequestParams = parse_params(call)
    assert call.session is not None
    await sync_to_async(set_log_level)(call.session, params.level)
    return {}
