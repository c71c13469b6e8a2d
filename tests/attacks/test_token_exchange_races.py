"""Token exchanges racing on real threads and connections (PostgreSQL and SQLite): a revocation of
the subject token while its exchange writes the new token's rows, and the same subject token
exchanged by many requests at once. Never a 500, never a live token outliving its subject's
revocation, never a TokenActor row without its token."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections
from django.test import Client
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import TokenActor
from mcp_oauth.resource_server.cache import token_checksum
from tests.support.races import race_inside_grant
from tests.support.token_exchange_helpers import allowing_adapter, api_resource, exchange, subject_pair

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def allowed(settings, user, resource):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter()}
    api_resource()


def _settle() -> float:
    # PostgreSQL shows the lock wait (someone_waits); SQLite does not: give the competitor a moment.
    return 10.0 if connection.vendor == "postgresql" else 2.0


def _exchanging(user, app, token: str):
    def run():
        try:
            client = Client()
            client.force_login(user)
            return exchange(client, app, token)
        finally:
            connections.close_all()

    return run


def test_a_revocation_while_the_exchange_writes_revokes_the_new_token(client, user, public_app, allowed, monkeypatch):
    client.force_login(user)
    subject = subject_pair(client, public_app)["access_token"]

    def revoke():
        try:
            return Client().post("/oauth/revoke", {"token": subject, "client_id": public_app.client_id}).status_code
        finally:
            connections.close_all()

    response, revoked = race_inside_grant(
        monkeypatch, _exchanging(user, public_app, subject), revoke, settle_seconds=_settle()
    )
    assert revoked == 200
    assert response.status_code in (200, 400), response.content
    AccessToken = get_access_token_model()
    assert not AccessToken.objects.filter(token_checksum=token_checksum(subject)).exists()
    if response.status_code == 200:  # the exchange won: the revocation, after it, took the new token too
        assert not AccessToken.objects.filter(token_checksum=token_checksum(response.json()["access_token"])).exists()
    else:
        assert response.json()["error"] == "invalid_grant"
    assert AccessToken.objects.filter(user=user).count() == 0


def test_the_same_subject_exchanged_by_twenty_requests_at_once(client, user, public_app, allowed):
    client.force_login(user)
    subject = subject_pair(client, public_app)["access_token"]
    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(pool.map(lambda _: _exchanging(user, public_app, subject)(), range(20)))
    statuses = sorted({response.status_code for response in responses})
    assert set(statuses) <= {200, 429, 503}, [r.content for r in responses if r.status_code not in (200, 429, 503)]
    for response in responses:
        if response.status_code != 200:
            assert response.has_header("Retry-After")
    issued = [response.json()["access_token"] for response in responses if response.status_code == 200]
    assert issued
    rows = set(TokenActor.objects.values_list("token_checksum", flat=True))
    tokens = set(get_access_token_model().objects.values_list("token_checksum", flat=True))
    assert rows <= tokens  # no actor row without its token
    assert {token_checksum(token) for token in issued} <= rows
