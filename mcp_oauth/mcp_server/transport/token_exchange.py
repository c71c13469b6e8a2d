"""What a tool gets from :meth:`ToolContext.exchange_token` (RFC 8693 token exchange), and the slot
through which the authorization server provides it.

The MCP endpoint does not import the authorization server (docs/explanation/architecture.md): the
start-up wiring installs the authorization server's in-process exchange
(``mcp_oauth.authorization_server.token_exchange.inprocess.exchange_token``) with
:func:`set_exchanger`; without it, :meth:`~.context.ToolContext.exchange_token` raises
:class:`TokenExchangeError` (``unsupported_grant_type``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["ExchangedToken", "TokenExchangeError", "exchanger", "set_exchanger"]


@dataclass(frozen=True)
class ExchangedToken:
    """An access token issued by token exchange (RFC 8693 §2.2.1).

    ``access_token`` (send it as ``Authorization: <token_type> <access_token>``), ``token_type``
    (``"Bearer"``), ``expires_in`` (seconds), ``scope`` (space-separated), ``resource`` (the
    protected resource it is bound to, RFC 8707), ``issued_token_type``
    (``urn:ietf:params:oauth:token-type:access_token``).
    """

    access_token: str
    token_type: str
    expires_in: int
    scope: str
    resource: str
    issued_token_type: str = "urn:ietf:params:oauth:token-type:access_token"

    @property
    def authorization(self) -> str:
        """The ``Authorization`` header value: ``"Bearer <access_token>"``."""
        return f"{self.token_type} {self.access_token}"

    def __repr__(self) -> str:  # never the token in a log line
        return f"ExchangedToken(token_type={self.token_type!r}, scope={self.scope!r}, resource={self.resource!r})"


class TokenExchangeError(Exception):
    """The exchange was refused: ``error`` is the RFC 6749 §5.2 / RFC 8693 §2.2.2 code
    (``invalid_request``, ``invalid_grant``, ``invalid_scope``, ``invalid_target``,
    ``unauthorized_client``, …), ``description`` the server's ``error_description``."""

    def __init__(self, error: str, description: str = "") -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description


#: ``(subject_token, resource, scope) -> ExchangedToken`` (synchronous), set at start-up.
Exchanger = Callable[[str, str, "str | Iterable[str] | None"], ExchangedToken]
_exchanger: dict[str, Any] = {"function": None}


def set_exchanger(function: Exchanger | None) -> None:
    """Install the in-process exchange (the start-up wiring does)."""
    _exchanger["function"] = function


def exchanger() -> Exchanger:
    """The installed in-process exchange.

    :raises TokenExchangeError: ``unsupported_grant_type`` when none is installed.
    """
    function = _exchanger["function"]
    if function is None:
        raise TokenExchangeError("unsupported_grant_type", "Token exchange is not available on this server.")
    return function
