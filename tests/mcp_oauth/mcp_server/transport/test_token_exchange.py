"""``mcp_oauth.mcp_server.transport.token_exchange``: what a tool gets from ``ctx.exchange_token``
(RFC 8693 §2.2.1: the ``Authorization`` value, a ``repr`` without the token), the refusal's
RFC 6749 §5.2 / RFC 8693 §2.2.2 code, and the slot the start-up wiring fills with the authorization
server's in-process exchange (``unsupported_grant_type`` when empty)."""

from __future__ import annotations

import pytest

from mcp_oauth.authorization_server.token_exchange.inprocess import exchange_token
from mcp_oauth.mcp_server.transport import token_exchange as slot
from mcp_oauth.mcp_server.transport.token_exchange import ExchangedToken, TokenExchangeError


def test_without_an_installed_exchanger():
    installed = slot.exchanger()
    slot.set_exchanger(None)
    try:
        with pytest.raises(TokenExchangeError) as raised:
            slot.exchanger()
        assert raised.value.error == "unsupported_grant_type"
    finally:
        slot.set_exchanger(installed)


def test_the_wiring_installs_the_authorization_servers_exchange():
    assert slot.exchanger() is exchange_token


def test_an_installed_exchange_is_the_one_returned():
    installed = slot.exchanger()

    def other(subject_token, resource, scope):
        return ExchangedToken("t", "Bearer", 60, "profile", resource)

    slot.set_exchanger(other)
    try:
        assert slot.exchanger() is other
        assert slot.exchanger()("s", "https://api.example", None).resource == "https://api.example"
    finally:
        slot.set_exchanger(installed)
    assert slot.exchanger() is installed


def test_an_exchanged_token_gives_its_authorization_value_and_hides_the_token():
    token = ExchangedToken("s3cr3t-value", "Bearer", 300, "profile", "https://api.example/")
    assert token.authorization == "Bearer s3cr3t-value"
    assert token.issued_token_type == "urn:ietf:params:oauth:token-type:access_token"
    assert repr(token) == "ExchangedToken(token_type='Bearer', scope='profile', resource='https://api.example/')"
    assert "s3cr3t" not in repr(token) and "s3cr3t" not in str(token)
    assert ExchangedToken("v", "DPoP", 1, "", "r").authorization == "DPoP v"
    with pytest.raises(AttributeError):
        token.scope = "more"  # frozen


def test_an_exchange_error_carries_its_code_and_description():
    refused = TokenExchangeError("invalid_target", "Not for this API.")
    assert (refused.error, refused.description, str(refused)) == (
        "invalid_target",
        "Not for this API.",
        "invalid_target: Not for this API.",
    )
    bare = TokenExchangeError("invalid_grant")
    assert (bare.description, str(bare)) == ("", "invalid_grant")
