"""A member removed from an organization keeps nothing of it, and only of it (issue 31)."""

from __future__ import annotations

import hashlib
import secrets

import pytest
from django.test import Client
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
    set_token_value,
)

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.authorization_server.user_data.memberships import reconcile_member, remove_member
from mcp_oauth.models import AuditEvent, Consent, McpSession, Organization, OrganizationMembership
from mcp_oauth.signals import organization_member_removed
from tests.support.organizations import bind, modern, organization

pytestmark = pytest.mark.django_db

ACME_URI = "http://testserver/mcp/o/acme"


def refresh_token(user, application, raw_access: str, resource: str) -> tuple[str, object]:
    RefreshToken = get_refresh_token_model()
    paired = get_access_token_model().objects.get(token_checksum=hashlib.sha256(raw_access.encode()).hexdigest())
    row = RefreshToken(user=user, application=application, access_token=paired, resource=[resource])
    raw = secrets.token_urlsafe(32)
    set_token_value(row, raw)
    row.save()
    return raw, row


@pytest.fixture
def apps():
    Application = get_application_model()
    return [
        Application.objects.create(
            name=f"client {n}",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1/cb",
        )
        for n in range(4)
    ]


def test_removing_a_member_takes_back_what_acts_for_that_organization_only(
    resource, user, apps, mint_token, django_capture_on_commit_callbacks
):
    acme, globex = organization("acme", user), organization("globex", user)
    AccessToken = get_access_token_model()
    chosen = mint_token(user, apps[0], resource=resource.uri)
    bind(chosen, acme)
    raw_refresh, refresh = refresh_token(user, apps[0], chosen, resource.uri)
    bind(raw_refresh, acme, kind="refresh_token")
    mint_token(user, apps[1], resource=ACME_URI)
    for_globex = mint_token(user, apps[2], resource=resource.uri)
    bind(for_globex, globex)
    mint_token(user, apps[3], resource=resource.uri)
    Consent.objects.create(user=user, application=apps[0], scope="mcp", resources=[resource.uri], organization=acme)
    Consent.objects.create(user=user, application=apps[1], scope="mcp", resources=[ACME_URI])
    Consent.objects.create(user=user, application=apps[2], scope="mcp", resources=[resource.uri], organization=globex)
    Consent.objects.create(user=user, application=apps[3], scope="mcp", resources=[resource.uri])
    sessions = {
        org: McpSession.objects.create(
            user=user, application=apps[0], resource=resource, organization=org, protocol_version="2025-11-25"
        )
        for org in (acme, globex)
    }
    heard = []

    def listener(sender, organization, user, **kwargs):
        heard.append((sender, organization.slug, user.username))

    organization_member_removed.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            OrganizationMembership.objects.get(organization=acme, user=user).delete()
    finally:
        organization_member_removed.disconnect(listener)

    remaining = {token.application_id for token in AccessToken.objects.filter(user=user)}
    assert remaining == {apps[2].pk, apps[3].pk}
    refresh.refresh_from_db()
    assert refresh.revoked is not None
    revoked = dict(Consent.objects.filter(user=user).values_list("application_id", "revoked_at"))
    assert [app.pk for app in apps if revoked[app.pk] is not None] == [apps[0].pk, apps[1].pk]
    assert McpSession.objects.get(pk=sessions[acme].pk).ended_at is not None
    assert McpSession.objects.get(pk=sessions[globex].pk).ended_at is None
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    assert event.organization_id == acme.pk and event.user_id == user.pk
    assert event.detail == {
        "reason": "organization_member_removed",
        "user_id": str(user.pk),
        "organization": "acme",
        "tokens": 3,
        "consents": 2,
        "tasks": 0,
        "sessions": 1,
    }
    assert heard == [(Organization, "acme", "alice")]


def test_remove_member_is_what_a_site_with_its_own_tenant_model_calls(resource, user, public_app, mint_token):
    acme = organization("acme")  # the site keeps its members elsewhere
    mint_token(user, public_app, resource=ACME_URI)
    assert remove_member(acme, user) == {"tokens": 1, "consents": 0, "tasks": 0, "sessions": 0}
    assert not get_access_token_model().objects.filter(user=user).exists()


def test_deleting_the_organization_or_the_user_removes_memberships_without_the_ceremony(resource, user, other_user):
    acme = organization("acme", user, other_user)
    user.delete()
    acme.delete()
    assert not OrganizationMembership.objects.exists()
    assert not AuditEvent.objects.filter(
        kind=AuditEvent.Kind.GRANTS_REVOKED, detail__reason="organization_member_removed"
    ).exists()


class NoMembershipsAdapter(DefaultMCPAdapter):
    """A site whose own tenant model no longer lists anyone (the membership ended over there)."""

    def organization_memberships(self, user) -> dict[int, str]:
        return {}


def test_a_membership_the_adapter_no_longer_lists_is_removed_on_the_first_refusal(
    resource, user, public_app, mint_token, settings, django_capture_on_commit_callbacks
):
    acme = organization("acme", user)  # our row stays: the site's own model says otherwise
    token = mint_token(user, public_app, resource=ACME_URI)
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "ADAPTER": "tests.mcp_oauth.authorization_server.user_data.test_memberships.NoMembershipsAdapter",
    }
    with django_capture_on_commit_callbacks(execute=True):
        response = modern(Client(), "/mcp/o/acme", token, "tools/call", {"name": "whoami"})
    assert response.status_code == 401 and 'error="invalid_token"' in response["WWW-Authenticate"]
    assert not get_access_token_model().objects.filter(user=user).exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    assert (event.organization_id, event.detail["reason"], event.detail["tokens"]) == (
        acme.pk,
        "organization_member_removed",
        1,
    )


def test_reconcile_member_keeps_a_member_the_adapter_still_lists(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    mint_token(user, public_app, resource=ACME_URI)
    assert reconcile_member(acme.pk, user.pk) is False
    assert get_access_token_model().objects.filter(user=user).count() == 1
