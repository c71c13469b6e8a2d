"""Third-party connections (elicitation.providers): fresh access tokens, undecryptable or expired connections dropped and audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from elicitation.models import (
    ThirdPartyConnection,
)
from elicitation.providers import fresh_access_token, revoke_connection
from tests.support.elicitation_keys import audit_events, make_connection, make_provider, new_key, unique, use_keys
from tests.support.live import free_port

pytestmark = pytest.mark.django_db


def test_fresh_access_token_returns_the_decrypted_token(key, user):
    access = unique("access")
    connection = make_connection(user, make_provider(), access, expires_at=timezone.now() + timedelta(hours=1))
    assert fresh_access_token(connection) == access
    assert ThirdPartyConnection.objects.get(pk=connection.pk).last_used_at is not None
    assert audit_events() == []


@pytest.mark.parametrize("expired", [False, True], ids=["access-token", "refresh-token"])
def test_an_undecryptable_connection_is_deleted_and_audited(settings, key, user, expired):
    provider = make_provider()
    expires_at = timezone.now() + (timedelta(hours=-1) if expired else timedelta(hours=1))
    connection = make_connection(user, provider, unique("access"), unique("refresh"), expires_at=expires_at)
    use_keys(settings, new_key())  # the key that encrypted the tokens is gone

    assert fresh_access_token(connection) is None
    assert not ThirdPartyConnection.objects.filter(pk=connection.pk).exists()
    [event] = audit_events()
    assert event.user == user
    assert event.detail == {"provider": "acme", "reason": "undecryptable", "by": None}


def test_an_expired_connection_without_refresh_token_is_dropped(key, user):
    connection = make_connection(user, make_provider(), "at", "", expires_at=timezone.now() - timedelta(minutes=1))
    assert fresh_access_token(connection) is None
    assert ThirdPartyConnection.objects.count() == 0
    assert [e.detail["reason"] for e in audit_events()] == ["expired"]


def test_revoking_an_undecryptable_connection_still_deletes_it(settings, key, user):
    provider = make_provider(revocation_endpoint=f"http://127.0.0.1:{free_port()}/revoke", secret="client-secret")
    connection = make_connection(user, provider, unique("access"), unique("refresh"))
    use_keys(settings, new_key())
    revoke_connection(ThirdPartyConnection.objects.get(pk=connection.pk), reason="test")
    assert ThirdPartyConnection.objects.count() == 0
    assert [e.detail for e in audit_events()] == [{"provider": "acme", "reason": "test", "by": None}]
