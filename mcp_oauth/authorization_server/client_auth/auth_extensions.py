"""The ext-auth MCP extensions this server offers, announced in ``capabilities.extensions``
(``server/discover`` in 2026-07-28, ``initialize`` in 2025-11-25; :mod:`mcp_oauth.mcp_server.transport.extensions`).

* ``io.modelcontextprotocol/oauth-client-credentials`` — the ``client_credentials`` grant with
  ``client_secret_basic`` / ``client_secret_post`` or ``private_key_jwt`` (:mod:`.client_assertion`);
  on while ``MCP_OAUTH["CLIENT_CREDENTIALS_EXTENSION"]``;
* ``io.modelcontextprotocol/enterprise-managed-authorization`` — ID-JAGs redeemed with the
  RFC 7523 JWT bearer grant (:mod:`.jwt_bearer`); on while ``MCP_OAUTH["ENTERPRISE_MANAGED_AUTHORIZATION"]``.

Neither extension defines settings: each is announced as ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_oauth.mcp_server.transport.extensions import register_extension
from mcp_oauth.settings import mcp_oauth_settings

CLIENT_CREDENTIALS_EXTENSION = "io.modelcontextprotocol/oauth-client-credentials"
ENTERPRISE_MANAGED_AUTHORIZATION_EXTENSION = "io.modelcontextprotocol/enterprise-managed-authorization"


def _client_credentials() -> Mapping[str, Any] | None:
    return {} if mcp_oauth_settings.CLIENT_CREDENTIALS_EXTENSION else None


def _enterprise() -> Mapping[str, Any] | None:
    return {} if mcp_oauth_settings.ENTERPRISE_MANAGED_AUTHORIZATION else None


def register_auth_extensions() -> None:
    """Offer both extensions (each announced only while its setting is on). Called from ``AppConfig.ready()``."""
    register_extension(CLIENT_CREDENTIALS_EXTENSION, _client_credentials)
    register_extension(ENTERPRISE_MANAGED_AUTHORIZATION_EXTENSION, _enterprise)
