"""ID-JAGs and organizations (mcp_oauth.authorization_server.enterprise_identity.jwt_bearer): an enterprise
IdP whose ``organization`` is set yields tokens for that organization alone, for its members, under
its scopes and lifetime."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import AuditEvent, OrganizationMembership
from tests.mcp_oauth.authorization_server.enterprise_identity.test_jwt_bearer import (  # noqa: F401 - fixtures
    assert_error,
    chat_client,
    id_jag,
    idp_key,
    provider,
    redeem,
)
from tests.support.organization_helpers import (
    add_member,
    make_organization,
    organization_endpoint,
    token_organization_id,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme(user, provider):
    organization = make_organization("acme", "Acme Corp")
    add_member(user, organization)
    provider.organization = organization
    provider.save()
    return organization


def test_the_token_acts_for_the_idps_organization(client, provider, chat_client, idp_key, resource, acme):
    app, secret = chat_client
    response = redeem(client, app, secret, id_jag(idp_key, app, resource.uri))
    assert response.status_code == 200, response.content
    assert token_organization_id(response.json()["access_token"]) == acme.pk


def test_the_organizations_scopes_and_lifetime_apply(client, provider, chat_client, idp_key, resource, acme, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "SCOPES": {"mcp": "MCP", "files": "Files"}}
    acme.allowed_scopes, acme.access_token_lifetime = "files", 90
    acme.save()
    app, secret = chat_client
    response = redeem(client, app, secret, id_jag(idp_key, app, resource.uri, scope="mcp files"))
    assert response.status_code == 200, response.content
    assert (response.json()["scope"], response.json()["expires_in"]) == ("files", 90)


def test_its_own_organizations_endpoint(client, provider, chat_client, idp_key, resource, acme):
    endpoint = organization_endpoint(acme)
    provider.allowed_resources.add(endpoint)
    app, secret = chat_client
    response = redeem(client, app, secret, id_jag(idp_key, app, endpoint.uri))
    assert response.status_code == 200, response.content
    assert get_access_token_model().objects.get().resource == [endpoint.uri]


def test_another_organizations_endpoint_is_invalid_grant(client, provider, chat_client, idp_key, resource, acme, user):
    globex = make_organization("globex", "Globex")
    add_member(user, globex)
    endpoint = organization_endpoint(globex)
    provider.allowed_resources.add(endpoint)
    app, secret = chat_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, endpoint.uri)), "invalid_grant")
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ASSERTION_REFUSED)
    assert event.detail["reason"] == "organization"


def test_a_user_who_is_not_a_member_is_invalid_grant(client, provider, chat_client, idp_key, resource, acme, user):
    OrganizationMembership.objects.filter(user=user).delete()
    app, secret = chat_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "invalid_grant")
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.ASSERTION_REFUSED).detail["reason"] == "organization"


def test_an_idp_of_no_organization_at_an_organizations_endpoint_needs_a_member(
    client, provider, chat_client, idp_key, resource, user
):
    initech = make_organization("initech", "Initech")
    endpoint = organization_endpoint(initech)
    provider.allowed_resources.add(endpoint)
    app, secret = chat_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, endpoint.uri)), "invalid_grant")
    add_member(user, initech)
    response = redeem(client, app, secret, id_jag(idp_key, app, endpoint.uri))
    assert response.status_code == 200, response.content
    assert token_organization_id(response.json()["access_token"]) == initech.pk
