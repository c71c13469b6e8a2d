"""The organization of a grant at the token endpoint (mcp_oauth.authorization_server.organizations.token_binding):
carried from the consent page's choice through the code to the tokens and their refreshes; the
organization's scopes, lifetimes, membership and client decision applied to every grant."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.authorization_server.organizations.token_binding import prune_token_organizations
from mcp_oauth.models import AuditEvent, Consent, OrganizationClient, OrganizationMembership, TokenOrganization
from tests.support.oauth_helpers import token_request
from tests.support.organization_fixtures import acme, globex  # noqa: F401 - fixtures
from tests.support.organization_helpers import (
    add_member,
    checksum,
    code_for,
    make_organization,
    organization_endpoint,
    token_organization_id,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


def exchange(client, app, code, verifier, **extra):
    response = token_request(client, app, code, verifier, **extra)
    assert response.status_code == 200, response.content
    return response.json()


def refresh(client, app, refresh_token, **extra):
    return client.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id, **extra},
    )


def test_the_chosen_organization_travels_from_the_code_to_both_tokens(logged_in, public_app, acme, globex):
    code, verifier = code_for(logged_in, public_app, globex)
    code_row = TokenOrganization.objects.get(token_checksum=checksum(code))
    assert (code_row.token_kind, code_row.organization_id) == ("code", globex.pk)
    body = exchange(logged_in, public_app, code, verifier)
    assert token_organization_id(body["access_token"]) == globex.pk
    assert token_organization_id(body["refresh_token"]) == globex.pk
    kinds = set(
        TokenOrganization.objects.filter(
            token_checksum__in=[checksum(body["access_token"]), checksum(body["refresh_token"])]
        ).values_list("token_kind", flat=True)
    )
    assert kinds == {"access_token", "refresh_token"}
    consent = Consent.objects.get(user__username="alice")
    assert consent.organization == globex


def test_a_refreshed_pair_inherits_the_refresh_tokens_organization(logged_in, public_app, acme, globex, settings):
    code, verifier = code_for(logged_in, public_app, acme)
    first = exchange(logged_in, public_app, code, verifier)
    response = refresh(logged_in, public_app, first["refresh_token"])
    assert response.status_code == 200, response.content
    second = response.json()
    assert token_organization_id(second["access_token"]) == acme.pk
    assert token_organization_id(second["refresh_token"]) == acme.pk


def test_no_organization_no_rows(logged_in, public_app):
    code, verifier = code_for(logged_in, public_app, None)
    body = exchange(logged_in, public_app, code, verifier)
    assert TokenOrganization.objects.count() == 0
    assert token_organization_id(body["access_token"]) is None


def test_scopes_are_narrowed_to_the_organizations_allowed_scopes(logged_in, user, public_app, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "SCOPES": {"mcp": "MCP", "files": "Files"}}
    acme = make_organization("acme", allowed_scopes="mcp")
    add_member(user, acme)
    code, verifier = code_for(logged_in, public_app, acme, scope="mcp files")
    body = exchange(logged_in, public_app, code, verifier)
    assert body["scope"] == "mcp"
    assert get_access_token_model().objects.get().scope == "mcp"


def test_no_allowed_scope_left_is_invalid_scope(logged_in, user, public_app):
    acme = make_organization("acme", allowed_scopes="files")
    add_member(user, acme)
    code, verifier = code_for(logged_in, public_app, acme, scope="mcp")
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 400 and response.json()["error"] == "invalid_scope"
    assert not get_access_token_model().objects.exists()


def test_the_organizations_access_token_lifetime(logged_in, user, public_app):
    acme = make_organization("acme", access_token_lifetime=120)
    add_member(user, acme)
    code, verifier = code_for(logged_in, public_app, acme)
    body = exchange(logged_in, public_app, code, verifier)
    assert body["expires_in"] == 120
    token = get_access_token_model().objects.get()
    assert timedelta(seconds=110) < token.expires - timezone.now() <= timedelta(seconds=120)


def test_the_organizations_refresh_token_lifetime(logged_in, user, public_app):
    acme = make_organization("acme", refresh_token_lifetime=600)
    add_member(user, acme)
    code, verifier = code_for(logged_in, public_app, acme)
    body = exchange(logged_in, public_app, code, verifier)
    TokenOrganization.objects.filter(token_checksum=checksum(body["refresh_token"])).update(
        created_at=timezone.now() - timedelta(seconds=601)
    )
    response = refresh(logged_in, public_app, body["refresh_token"])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert "refresh token lifetime" in response.json()["error_description"]


def test_a_member_removed_since_the_code_gets_no_token(logged_in, user, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    OrganizationMembership.objects.filter(user=user, organization=acme).delete()
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert not get_access_token_model().objects.exists()


def test_a_member_removed_cannot_refresh(logged_in, user, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    body = exchange(logged_in, public_app, code, verifier)
    OrganizationMembership.objects.filter(user=user, organization=acme).delete()
    response = refresh(logged_in, public_app, body["refresh_token"])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    # The removal itself revoked the refresh token (mcp_oauth.authorization_server.user_data.memberships).
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 0


def test_an_inactive_organization_gets_no_token(logged_in, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    acme.is_active = False
    acme.save()
    response = token_request(logged_in, public_app, code, verifier)
    assert response.json()["error"] == "invalid_grant"


def test_a_client_refused_since_the_code_gets_no_token_and_it_is_audited(logged_in, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    OrganizationClient.objects.create(organization=acme, application=public_app, status="denied")
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_CLIENT_REFUSED)
    assert event.organization == acme and event.detail["stage"] == "token"
    assert event.detail["outcome"] == "denied"


def test_a_per_organization_endpoints_tokens_act_for_it(logged_in, public_app, acme):
    endpoint = organization_endpoint(acme)
    code, verifier = code_for(logged_in, public_app, None, resource=endpoint.uri)
    body = exchange(logged_in, public_app, code, verifier)
    token = get_access_token_model().objects.get()
    assert token.resource == [endpoint.uri]
    assert token_organization_id(body["access_token"]) == acme.pk
    assert Consent.objects.get().organization == acme


def test_prune_deletes_expired_rows_only(logged_in, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    exchange(logged_in, public_app, code, verifier)
    assert TokenOrganization.objects.count() == 3  # code, access, refresh
    later = timezone.now() + timedelta(hours=2)
    # The code's and the access token's rows are past; the refresh token's follows the site's lifetime.
    deleted = prune_token_organizations(later)
    assert deleted == 2
    assert list(TokenOrganization.objects.values_list("token_kind", flat=True)) == ["refresh_token"]
