"""Deletion and erasure leave nothing keyed to the person (issues 28 and 34), on SQLite and PostgreSQL.

Every table gets a row of the user first (:func:`tests.support.lifecycle_helpers.populate`); after the
deletion or the erasure one query per table (:func:`tests.support.lifecycle_helpers.leftovers`) finds none.
"""

from __future__ import annotations

import time

import pytest
from django.test import Client

from mcp_oauth.authorization_server.user_data.erasure import erase_user_data
from mcp_oauth.models import AuditEvent
from tests.support.lifecycle_helpers import RevocationEndpoint, leftovers, populate

pytestmark = pytest.mark.django_db


@pytest.fixture
def revocation():
    endpoint = RevocationEndpoint()
    yield endpoint
    endpoint.close()


def _revoked_at_provider(revocation) -> None:
    """The provider received the revocation of both tokens (sent after the commit, off the request)."""
    deadline = time.monotonic() + 10
    while len(revocation.received) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    bodies = "\n".join(revocation.received)
    assert "token=provider-refresh-token" in bodies and "token=provider-access-token" in bodies, bodies


def test_user_delete_leaves_nothing_but_anonymised_audit_rows(
    user, other_user, resource, public_app, revocation, django_user_model, django_capture_on_commit_callbacks
):
    state = populate(user, other_user, public_app, resource, revocation.url)
    pk = user.pk
    assert set(leftovers(pk, state)) >= {"access_tokens", "refresh_tokens", "tasks", "third_party_connections"}
    with django_capture_on_commit_callbacks(execute=True):
        django_user_model.objects.get(pk=pk).delete()
    assert leftovers(pk, state) == {}
    assert not django_user_model.objects.filter(pk=pk).exists()
    erased = AuditEvent.objects.get(kind="user.erased")
    assert erased.user_id is None and erased.ip_address is None
    assert erased.detail["reason"] == "deleted" and erased.detail["tasks"] == 1 and erased.detail["tokens_revoked"] >= 1
    # The other user's row stays theirs (their IP is theirs), without the erased user's id.
    mismatch = AuditEvent.objects.get(kind="identity.mismatch")
    assert mismatch.user_id == other_user.pk and "expected_user" not in mismatch.detail
    for event in AuditEvent.objects.exclude(user_id=other_user.pk):
        assert event.ip_address is None, event.kind
        assert str(pk) not in {str(v) for v in event.detail.values()} - {str(erased.detail.get("tasks"))}, event.detail
    _revoked_at_provider(revocation)


def test_erase_keeps_the_account_and_removes_the_rest(
    user, other_user, resource, public_app, revocation, django_user_model, django_capture_on_commit_callbacks
):
    state = populate(user, other_user, public_app, resource, revocation.url)
    with django_capture_on_commit_callbacks(execute=True):
        counts = erase_user_data(user)
    assert leftovers(user.pk, state) == {}
    assert django_user_model.objects.filter(pk=user.pk, is_active=True).exists()
    assert counts["third_party_connections"] == 1 and counts["stored_secrets"] == 1 and counts["elicitations"] == 2
    assert counts["sessions"] == 1 and counts["enterprise_identities"] == 1 and counts["id_tokens"] == 1
    _revoked_at_provider(revocation)


def test_the_tokens_stop_working_at_once(user, other_user, resource, public_app, revocation):
    """The erased user's access token is refused by the resource server (401), not merely deleted later."""
    from tests.support.oauth_helpers import bearer_works

    browser = Client()
    browser.force_login(user)
    from tests.support.oauth_helpers import get_code, token_request

    code, verifier, _ = get_code(browser, public_app)
    token = token_request(Client(), public_app, code, verifier).json()["access_token"]
    assert bearer_works(Client(), token)
    erase_user_data(user)
    assert not bearer_works(Client(), token)


def test_a_bulk_queryset_delete_erases_each_user(
    user, other_user, resource, public_app, revocation, django_user_model, django_capture_on_commit_callbacks
):
    """The admin's "delete selected users" is ``QuerySet.delete()``: ``pre_delete`` runs for each user."""
    state = populate(user, other_user, public_app, resource, revocation.url)
    pks = [user.pk, other_user.pk]
    with django_capture_on_commit_callbacks(execute=True):
        django_user_model.objects.filter(pk__in=pks).delete()
    assert leftovers(user.pk, state) == {}
    assert not AuditEvent.objects.filter(user_id__in=pks).exists()
    assert not AuditEvent.objects.filter(ip_address__isnull=False).exists()
    assert AuditEvent.objects.filter(kind="user.erased").count() == 2


def test_erasing_twice_is_harmless(user, other_user, resource, public_app, revocation):
    populate(user, other_user, public_app, resource, revocation.url)
    erase_user_data(user)
    again = erase_user_data(user)
    # Nothing left to delete; only the second run's own grants.revoked event was anonymised.
    assert {name: count for name, count in again.items() if count} == {"audit_anonymised": 1}


def test_an_erased_users_thousands_of_audit_rows_are_anonymised_without_loading_them(user, other_user):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    AuditEvent.objects.bulk_create(
        [AuditEvent(kind="token.issued", user=user, ip_address="203.0.113.8", detail={"n": i}) for i in range(5000)]
        + [AuditEvent(kind="grants.revoked", user=user, detail={"user_id": str(user.pk), "reason": "x"})]
        + [AuditEvent(kind="connection.revoked", user=other_user, detail={"by": user.pk, "provider": "p"})],
        batch_size=2000,
    )
    with CaptureQueriesContext(connection) as queries:
        counts = erase_user_data(user)
    assert counts["audit_anonymised"] == 5003  # and the erasure's own grants.revoked event
    assert not AuditEvent.objects.filter(user=user).exists()
    assert not AuditEvent.objects.filter(ip_address="203.0.113.8").exists()
    assert AuditEvent.objects.get(kind="grants.revoked", detail__reason="x").detail == {"reason": "x"}
    assert AuditEvent.objects.get(kind="connection.revoked").detail == {"by": None, "provider": "p"}
    assert AuditEvent.objects.get(kind="connection.revoked").user_id == other_user.pk
    # The 5,000 plain rows are updated by key range, never read: few statements.
    assert len(queries.captured_queries) < 80, len(queries.captured_queries)


def test_the_export_is_always_the_signed_in_users_own(user, other_user, resource, public_app, revocation):
    import json

    populate(other_user, user, public_app, resource, revocation.url)
    browser = Client()
    browser.force_login(user)
    response = browser.post(
        "/oauth/connected-apps/", {"action": "export", "user": other_user.pk, "user_id": other_user.pk}
    )
    document = json.loads(b"".join(response.streaming_content))
    assert document["user"]["username"] == "alice"
    assert document["sections"]["third_party_connections"] == [] and document["sections"]["consents"] == []


def test_a_slow_provider_does_not_hold_the_erasure(
    user, other_user, resource, public_app, django_capture_on_commit_callbacks
):
    """Revocation at the provider is off the request: a provider taking 3 s per call does not delay the erasure."""
    slow = RevocationEndpoint(delay=3)
    try:
        populate(user, other_user, public_app, resource, slow.url)
        started = time.monotonic()
        with django_capture_on_commit_callbacks(execute=True):
            erase_user_data(user)
        assert time.monotonic() - started < 2.5
        _revoked_at_provider_within(slow, 15)
    finally:
        slow.close()


def _revoked_at_provider_within(revocation, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while len(revocation.received) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(revocation.received) == 2
