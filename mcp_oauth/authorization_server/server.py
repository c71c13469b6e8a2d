"""The oauthlib server of the MCP profile: only the grants OAuth 2.1 keeps.

Authorization code (with PKCE), refresh token, client credentials, the RFC 7523 JWT bearer
grant with an ID-JAG (:mod:`.jwt_bearer`, Enterprise-Managed Authorization) and RFC 8693 token
exchange (:mod:`.token_exchange.grant`). The
implicit and password grants and the device grant are not offered at all, so a
request for them is answered ``unsupported_response_type`` /
``unsupported_grant_type`` (RFC 6749 §4.1.2.1, §5.2; OAuth 2.1 §1.6, §10;
RFC 9700 §2.1.2, §2.4) instead of being routed to a handler and refused later.
Installed as DOT's ``OAUTH2_SERVER_CLASS`` by default.

Tokens are drawn by :func:`random_token` unless the site sets DOT's ``ACCESS_TOKEN_GENERATOR`` /
``REFRESH_TOKEN_GENERATOR``. Their lifetime is oauthlib's callable ``expires_in``,
:func:`mcp_oauth.authorization_server.tokens.lifetimes.access_token_lifetime` (per client, resource,
organization, site), called once per token response after the grant is validated.
"""

from __future__ import annotations

import secrets

from oauthlib.oauth2.rfc6749.endpoints import (
    AuthorizationEndpoint,
    IntrospectEndpoint,
    ResourceEndpoint,
    RevocationEndpoint,
    TokenEndpoint,
)
from oauthlib.oauth2.rfc6749.errors import OAuth2Error
from oauthlib.oauth2.rfc6749.grant_types import AuthorizationCodeGrant, ClientCredentialsGrant, RefreshTokenGrant
from oauthlib.oauth2.rfc6749.tokens import BearerToken

from mcp_oauth.authorization_server.enterprise_identity.jwt_bearer import JWT_BEARER_GRANT_TYPE, JWTBearerGrant
from mcp_oauth.authorization_server.token_exchange.decision import TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.authorization_server.token_exchange.grant import TokenExchangeGrant
from mcp_oauth.authorization_server.tokens.lifetimes import access_token_lifetime


def random_token(request=None, refresh_token: bool = False) -> str:
    """An access or refresh token: 256 random bits from the OS generator, URL-safe base64 (43 characters).

    oauthlib's default draws each of its 30 characters with a separate ``SystemRandom`` call,
    about ten times the CPU for less entropy (~181 bits).
    """
    return secrets.token_urlsafe(32)


class MCPServer(AuthorizationEndpoint, IntrospectEndpoint, TokenEndpoint, ResourceEndpoint, RevocationEndpoint):
    """Same constructor as ``oauthlib.oauth2.Server``; extra keyword arguments (DOT's device-flow ones) are ignored."""

    def __init__(
        self,
        request_validator,
        token_expires_in=None,
        token_generator=None,
        refresh_token_generator=None,
        *args,
        **kwargs,
    ):
        self.auth_grant = AuthorizationCodeGrant(request_validator)
        self.credentials_grant = ClientCredentialsGrant(request_validator)
        self.refresh_grant = RefreshTokenGrant(request_validator)
        self.jwt_bearer_grant = JWTBearerGrant(request_validator)  # ID-JAG (Enterprise-Managed Authorization)
        self.token_exchange_grant = TokenExchangeGrant(request_validator)  # RFC 8693
        self.bearer = BearerToken(
            request_validator, token_generator or random_token, self._expires_in, refresh_token_generator
        )
        AuthorizationEndpoint.__init__(
            self, default_response_type="code", response_types={"code": self.auth_grant}, default_token_type=self.bearer
        )
        TokenEndpoint.__init__(
            self,
            default_grant_type="authorization_code",  # its handler answers unsupported_grant_type to unknown types
            grant_types={
                "authorization_code": self.auth_grant,
                "client_credentials": self.credentials_grant,
                "refresh_token": self.refresh_grant,
                JWT_BEARER_GRANT_TYPE: self.jwt_bearer_grant,
                TOKEN_EXCHANGE_GRANT_TYPE: self.token_exchange_grant,
            },
            default_token_type=self.bearer,
        )
        ResourceEndpoint.__init__(self, default_token="Bearer", token_types={"Bearer": self.bearer})
        RevocationEndpoint.__init__(self, request_validator)
        IntrospectEndpoint.__init__(self, request_validator)

    def _expires_in(self, request) -> int:
        """oauthlib's ``expires_in`` of this token response (seconds): :func:`access_token_lifetime`, once
        the validator has bound the request to its resource and organization (``prepare_lifetime``; a
        refusal there is raised again, with its audit, when the tokens are saved)."""
        prepare = getattr(self.request_validator, "prepare_lifetime", None)
        if prepare is not None:
            try:
                prepare(request)
            except OAuth2Error:
                pass
        return access_token_lifetime(request)
