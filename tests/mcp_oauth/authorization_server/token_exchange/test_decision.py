"""``mcp_oauth.authorization_server.token_exchange.decision``: the names of RFC 8693 (§2.1 grant type,
§3 token type), the adapter's decision and how the token endpoint answers each refusal
(RFC 6749 §5.2, RFC 8693 §2.2.2)."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.token_exchange.decision import (
    ACCESS_TOKEN_TYPE,
    TOKEN_EXCHANGE_GRANT_TYPE,
    TokenExchangeDecision,
    allow,
    refuse,
)
from mcp_oauth.models import AuditEvent, TokenActor
from tests.support.token_exchange_helpers import (
    exchange,
    subject_pair,
)


def test_the_adapter_refuses_by_default(logged_in, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": "mcp_oauth.adapter.DefaultMCPAdapter"}
    subject = subject_pair(logged_in, public_app)
    response = exchange(logged_in, public_app, subject["access_token"])
    assert response.status_code == 400
    assert response.json()["error"] == "unauthorized_client"
    assert not TokenActor.objects.exists()
    assert get_access_token_model().objects.count() == 1
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_EXCHANGE_REFUSED)
    assert event.detail["error"] == "unauthorized_client"
    assert event.client_id == public_app.client_id


def test_the_names_are_rfc_8693s():
    assert TOKEN_EXCHANGE_GRANT_TYPE == "urn:ietf:params:oauth:grant-type:token-exchange"
    assert ACCESS_TOKEN_TYPE == "urn:ietf:params:oauth:token-type:access_token"


def test_allow_and_refuse_build_the_decision():
    assert allow() == TokenExchangeDecision(True, "", "")
    assert refuse() == TokenExchangeDecision(False, "unauthorized_client", "")
    assert refuse("invalid_target", "Not for this API.") == TokenExchangeDecision(
        False, "invalid_target", "Not for this API."
    )
    with pytest.raises(AttributeError):
        allow().allowed = False  # frozen


def _refusing(error: str, description: str):
    from mcp_oauth.adapter import DefaultMCPAdapter

    def token_exchange_decision(self, request, client, subject_token, resource, scopes):
        return refuse(error, description)

    return type("Refusing", (DefaultMCPAdapter,), {"token_exchange_decision": token_exchange_decision})


@pytest.mark.parametrize(
    ("error", "answered"),
    [
        ("invalid_target", "invalid_target"),
        ("invalid_scope", "invalid_scope"),
        ("invalid_grant", "invalid_grant"),
        ("unauthorized_client", "unauthorized_client"),
        ("server_error", "unauthorized_client"),  # any other value
        ("made_up", "unauthorized_client"),
    ],
)
def test_a_refusal_is_answered_with_its_error_and_description(logged_in, public_app, settings, error, answered):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": _refusing(error, "Not for you.")}
    subject = subject_pair(logged_in, public_app)
    response = exchange(logged_in, public_app, subject["access_token"])
    assert response.status_code == 400
    assert response.json()["error"] == answered
    assert response.json().get("error_description") == "Not for you."
    assert not TokenActor.objects.exists()
    assert get_access_token_model().objects.count() == 1  # the subject token alone
