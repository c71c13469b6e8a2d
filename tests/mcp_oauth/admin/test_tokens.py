"""The tokens and consents screens (mcp_oauth.admin.tokens): revoking a consent, consents never added or deleted by hand."""

from __future__ import annotations

import pytest
from django.utils import timezone

from mcp_oauth.models import AuditEvent, Consent, TokenActor, TokenOrganization
from tests.mcp_oauth.admin.test_admin import (  # noqa: F401 - fixtures and helpers
    AccessToken,
    act,
    admin,
    live_token,
    messages_of,
    populated,
    url,
)
from tests.support.organization_helpers import add_member, checksum, make_organization

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


def test_revoking_an_organizations_consent_leaves_the_users_other_organization_alone(admin, populated, user):
    """A user connected the same client for A and for B: revoking A's consent revokes A's tokens only."""
    dcr = populated["dcr"]
    org_a, org_b = make_organization("acme"), make_organization("globex")
    add_member(user, org_a), add_member(user, org_b)
    consent_a = Consent.record_grant(user, dcr, ["mcp"], "http://testserver/mcp", organization=org_a)
    Consent.record_grant(user, dcr, ["mcp"], "http://testserver/mcp", organization=org_b)
    token_a, token_b = live_token(dcr, user, with_refresh=False), live_token(dcr, user, with_refresh=False)
    for raw, organization in ((token_a, org_a), (token_b, org_b)):
        TokenOrganization.objects.create(
            token_checksum=checksum(raw), token_kind=TokenOrganization.Kind.ACCESS_TOKEN, organization=organization
        )

    act(admin, Consent, "revoke_consents", [consent_a])

    remaining = {t.token_checksum for t in AccessToken.objects.filter(user=user, application=dcr)}
    assert checksum(token_a) not in remaining
    assert checksum(token_b) in remaining
    assert Consent.objects.get(user=user, application=dcr, organization=org_b).revoked_at is None
    assert Consent.objects.get(pk=consent_a.pk).revoked_at is not None
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_REVOKED).organization_id == org_a.pk


def test_consents_cannot_be_added_or_deleted_in_the_admin(admin, populated):
    consent = Consent.objects.first()
    assert admin.get(url(Consent, "add")).status_code == 403
    assert admin.post(url(Consent, "delete", consent.pk), {"post": "yes"}).status_code == 403
    assert Consent.objects.filter(pk=consent.pk).exists()


def test_token_actor_rows_say_who_the_token_is_delegated_to(admin):
    """The token actors list names a delegated token's acting client in plain words, a down-scoped one as such."""
    now = timezone.now()
    TokenActor.objects.create(token_checksum="a" * 64, act={"sub": "client-xyz"}, subject_token_checksum="b" * 64)
    TokenActor.objects.create(token_checksum="c" * 64, act=None, subject_token_checksum="d" * 64, expires=now)
    page = admin.get(url(TokenActor, "changelist")).content.decode()
    assert "delegated to client client-xyz" in page
    assert "down-scoped" in page
    assert "acted for by" not in page
