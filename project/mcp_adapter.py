"""The reference site's policy adapter: the default decisions, and one token exchange allowed.

The ``my_site_profile`` tool (``project/mcp_tools.py``) exchanges the caller's MCP token for a
token of this site's own API (``<site>/api``, scope ``profile``, ``project/api.py``) and reads
``/api/profile`` with it (RFC 8693 delegation: the API sees the user, and ``act`` names the client).
Nothing else is exchanged: not for another resource, nor another scope.
"""

from __future__ import annotations

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.authorization_server.token_exchange.decision import TokenExchangeDecision, allow, refuse
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.resource_uris import canonicalize_resource

from .apps import API_PATH


class ReferenceSiteAdapter(DefaultMCPAdapter):
    """:class:`~mcp_oauth.adapter.DefaultMCPAdapter`, with :meth:`token_exchange_decision` allowing
    the MCP endpoint's tokens to be exchanged for ``profile`` tokens of ``<site>/api``."""

    def token_exchange_decision(self, request, client, subject_token, resource, scopes) -> TokenExchangeDecision:
        if resource.uri != canonicalize_resource(mcp_oauth_settings.absolute(API_PATH)):
            return refuse("invalid_target", "Tokens are exchanged here only for this site's API.")
        if set(scopes) != {"profile"}:
            return refuse("invalid_scope", "Tokens of this site's API are exchanged with the profile scope only.")
        if resource.uri in (subject_token.resource or []):
            return refuse("invalid_grant", "Only the MCP endpoint's tokens are exchanged for the API's.")
        return allow()
