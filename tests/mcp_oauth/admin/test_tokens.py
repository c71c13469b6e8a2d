"""The tokens and consents screens (mcp_oauth.admin.tokens): revoking a consent, consents never added or deleted by hand."""

from __future__ import annotations

import pytest

from mcp_oauth.models import AuditEvent, Consent
from tests.mcp_oauth.admin.test_admin import (  # noqa: F401 - fixtures and helpers
    AccessToken,
    act,
    admin,
    messages_of,
    populated,
    url,
)

pytestmark = pytest.mark.django_db


def test_revoke_consent_revokes_that_users_tokens_only(admin, populated, user, other_user):
    dcr = populated["dcr"]
    consent = Consent.objects.get(user=user, application=dcr)
    response = act(admin, Consent, "revoke_consents", [consent])
    assert any("Revoked 1 consent" in m for m in messages_of(response))
    consent.refresh_from_db()
    assert consent.revoked_at is not None
    assert not AccessToken.objects.filter(user=user, application=dcr).exists()
    assert AccessToken.objects.filter(user=other_user, application=dcr).exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_REVOKED)
    assert event.user == user and event.detail["action"] == "revoke consent"
    # a new approval brings it back
    Consent.record_grant(user, dcr, ["mcp"])
    consent.refresh_from_db()
    assert consent.revoked_at is None


def test_consents_cannot_be_added_or_deleted_in_the_admin(admin, populated):
    consent = Consent.objects.first()
    assert admin.get(url(Consent, "add")).status_code == 403
    assert admin.post(url(Consent, "delete", consent.pk), {"post": "yes"}).status_code == 403
    assert Consent.objects.filter(pk=consent.pk).exists()
