"""Revoking a subject token kills every token exchanged from it (RFC 7009 with RFC 8693): along a
chain of any length, and when the revocation lands while an exchange of it is being decided."""

from __future__ import annotations

import pytest
from django.test import Client
from oauth2_provider.models import get_access_token_model

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.authorization_server.token_exchange.decision import allow
from mcp_oauth.models import TokenActor
from mcp_oauth.resource_server.cache import token_checksum
from tests.support.token_exchange_helpers import allowing_adapter, api_resource, exchange, subject_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource):
    api_resource()
    client.force_login(user)
    return client


def live(token: str) -> bool:
    return get_access_token_model().objects.filter(token_checksum=token_checksum(token)).exists()


def test_a_chain_longer_than_ten_exchanges_dies_with_its_root(logged_in, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter()}
    chain = [subject_pair(logged_in, public_app)["access_token"]]
    for _ in range(13):  # each token exchanged for the next one, for the same resource
        response = exchange(logged_in, public_app, chain[-1], resource=None, scope="mcp")
        assert response.status_code == 200, response.content
        chain.append(response.json()["access_token"])
    revoked = logged_in.post("/oauth/revoke", {"token": chain[0], "client_id": public_app.client_id})
    assert revoked.status_code == 200
    assert [index for index, token in enumerate(chain) if live(token)] == []


def test_a_revocation_during_the_exchange_leaves_no_live_token(logged_in, public_app, settings):
    subject = subject_pair(logged_in, public_app)

    class RevokedWhileDeciding(DefaultMCPAdapter):
        """The user revokes the subject token (another request) while the exchange is decided."""

        def token_exchange_decision(self, request, client, subject_token, resource, scopes):
            response = Client().post(
                "/oauth/revoke", {"token": subject["access_token"], "client_id": public_app.client_id}
            )
            assert response.status_code == 200
            return allow()

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": RevokedWhileDeciding}
    before = get_access_token_model().objects.count()
    response = exchange(logged_in, public_app, subject["access_token"])
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_grant"
    assert "access_token" not in response.json()
    assert get_access_token_model().objects.count() == before - 1  # the subject token, revoked; nothing new
    assert not TokenActor.objects.exists()


def test_a_refresh_token_reused_revokes_what_its_family_s_access_token_was_exchanged_for(
    logged_in, public_app, settings
):
    """RFC 9700 §4.14.2: a refresh token replayed outside the grace revokes its family; the tokens
    exchanged from the family's live access token go with it (the replay means theft)."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter(), "REFRESH_TOKEN_GRACE_SECONDS": 0}
    first = subject_pair(logged_in, public_app)

    def refresh(token: str):
        data = {"grant_type": "refresh_token", "refresh_token": token, "client_id": public_app.client_id}
        return logged_in.post("/oauth/token", data)

    second = refresh(first["refresh_token"])
    assert second.status_code == 200, second.content
    exchanged = exchange(logged_in, public_app, second.json()["access_token"], resource=None, scope="mcp")
    assert exchanged.status_code == 200, exchanged.content
    assert refresh(first["refresh_token"]).json()["error"] == "invalid_grant"  # the replay
    assert not live(second.json()["access_token"])  # the family, revoked
    assert not live(exchanged.json()["access_token"])
