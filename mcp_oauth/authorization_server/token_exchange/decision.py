"""The names of RFC 8693 token exchange and the shape of the adapter's decision on one.

:meth:`mcp_oauth.adapter.DefaultMCPAdapter.token_exchange_decision` returns a
:class:`TokenExchangeDecision`; the default refuses every exchange (``unauthorized_client``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ACCESS_TOKEN_TYPE",
    "TOKEN_EXCHANGE_GRANT_TYPE",
    "TokenExchangeDecision",
    "allow",
    "refuse",
]

#: RFC 8693 §2.1 ``grant_type``.
TOKEN_EXCHANGE_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:token-exchange"
#: RFC 8693 §3 token type identifier of an access token (the only type exchanged and issued here).
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


@dataclass(frozen=True)
class TokenExchangeDecision:
    """Whether one token exchange may go ahead.

    ``allowed``; when refused, ``error`` is the OAuth error code answered (HTTP 400):
    ``unauthorized_client`` (this client may not exchange, RFC 6749 §5.2), ``invalid_target``
    (not for this resource, RFC 8693 §2.2.2), ``invalid_scope`` or ``invalid_grant`` (not for this
    subject token); any other value is answered ``unauthorized_client``. ``description`` becomes the
    ``error_description``.
    """

    allowed: bool
    error: str = "unauthorized_client"
    description: str = ""


def allow() -> TokenExchangeDecision:
    """An allowed exchange."""
    return TokenExchangeDecision(True, "", "")


def refuse(error: str = "unauthorized_client", description: str = "") -> TokenExchangeDecision:
    """A refused exchange answered ``error`` (see :class:`TokenExchangeDecision`)."""
    return TokenExchangeDecision(False, error, description)
