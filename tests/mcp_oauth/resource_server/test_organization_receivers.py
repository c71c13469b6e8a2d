"""The token entries an organization change makes stale are dropped at once (issue 31)."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.test import RequestFactory

from mcp_oauth.models import OrganizationClient, OrganizationMembership, TokenOrganization
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from mcp_oauth.resource_server.cache import TOKEN_PREFIX, token_checksum
from mcp_oauth.resource_server.decoded import TOMBSTONE
from mcp_oauth.settings import mcp_oauth_settings
from tests.support.organizations import bind, organization

pytestmark = pytest.mark.django_db


def principal(token: str, resource):
    return authenticate_bearer(RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}"), resource)


def entry(token: str):
    return caches[mcp_oauth_settings.TOKEN_CACHE].get(TOKEN_PREFIX + token_checksum(token))


def test_a_new_token_organization_row_leaves_the_entry_alone(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    token = mint_token(user, public_app, resource=resource.uri)
    bind(token, acme)  # written before the token is ever used, as the token endpoint does
    assert principal(token, resource).organization.slug == "acme"
    assert entry(token) not in (None, TOMBSTONE)


def test_a_token_organization_row_deleted_drops_the_entry(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    token = mint_token(user, public_app, resource=resource.uri)
    row = bind(token, acme)
    assert principal(token, resource).organization.slug == "acme"
    row.delete()
    assert entry(token) == TOMBSTONE
    assert principal(token, resource).organization is None
    assert not TokenOrganization.objects.exists()


def test_a_membership_change_drops_every_entry_of_the_user(resource, user, other_user, public_app, mint_token):
    acme = organization("acme", user, other_user)
    mine, theirs = (
        mint_token(user, public_app, resource=resource.uri),
        mint_token(other_user, public_app, resource=resource.uri),
    )
    for token in (mine, theirs):
        bind(token, acme)
        principal(token, resource)
    OrganizationMembership.objects.filter(user=user).update(role="admin")  # a bulk update: no signal
    assert entry(mine) not in (None, TOMBSTONE)
    OrganizationMembership.objects.get(user=user).save()
    assert entry(mine) == TOMBSTONE and entry(theirs) not in (None, TOMBSTONE)


def test_an_approval_change_drops_the_entries_of_the_client(resource, service, mint_token):
    acme = organization("acme")
    application, _ = service
    approval = OrganizationClient.objects.create(organization=acme, application=application, status="approved")
    token = mint_token(None, application, resource=resource.uri)
    bind(token, acme)
    assert principal(token, resource).organization.slug == "acme"
    approval.delete()
    assert entry(token) == TOMBSTONE
    with pytest.raises(BearerChallenge):
        principal(token, resource)
