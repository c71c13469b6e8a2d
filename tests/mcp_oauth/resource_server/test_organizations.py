"""``BearerPrincipal.organization`` (issue 31): the endpoint's organization, else the token's
``TokenOrganization``, else None; an inactive organization or a user who is no longer a member is
401 ``invalid_token`` at once, cached entries included; no query on the hot path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client, RequestFactory
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_application_model

from mcp_oauth.models import Organization, OrganizationClient, OrganizationMembership, ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from mcp_oauth.resource_server.cache import bump_resource_generation, resource_by_uri
from mcp_oauth.resource_server.organization_endpoints import endpoint_uri
from tests.support.organizations import bind, initialize, legacy, modern, organization, structured

pytestmark = pytest.mark.django_db

ORG_PATH = "/mcp/o/acme"
ORG_URI = "http://testserver/mcp/o/acme"


@pytest.fixture(autouse=True)
def _tools(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_REGISTRY": "tests.support.organizations.REGISTRY"}


def who(token: str, path: str = "/mcp"):
    return modern(Client(), path, token, "tools/call", {"name": "who", "arguments": {}})


def assert_invalid_token(response, path: str = "/mcp") -> None:
    assert response.status_code == 401, response.content
    challenge = response["WWW-Authenticate"]
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="http://testserver/.well-known/oauth-protected-resource{path}"' in challenge


def test_a_token_chosen_for_no_organization_acts_for_none(resource, user, public_app, mint_token):
    organization("acme", user)
    token = mint_token(user, public_app, resource=resource.uri)
    assert structured(who(token)) == {"user": "alice", "organization": None, "resource": "http://testserver/mcp"}


def test_a_token_chosen_on_the_shared_endpoint_acts_for_its_organization(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    token = mint_token(user, public_app, resource=resource.uri)
    bind(token, acme)
    assert structured(who(token)) == {"user": "alice", "organization": "acme", "resource": "http://testserver/mcp"}


def test_a_token_of_an_organization_endpoint_acts_for_it(resource, user, public_app, mint_token):
    organization("acme", user)
    token = mint_token(user, public_app, resource=ORG_URI)
    assert structured(who(token, ORG_PATH)) == {"user": "alice", "organization": "acme", "resource": ORG_URI}


def test_a_token_of_an_organization_the_user_does_not_belong_to_is_401(
    resource, user, other_user, public_app, mint_token
):
    acme = organization("acme", other_user)
    token = mint_token(user, public_app, resource=resource.uri)
    bind(token, acme)
    assert_invalid_token(who(token))
    endpoint_token = mint_token(user, public_app, resource=ORG_URI)
    assert_invalid_token(who(endpoint_token, ORG_PATH), ORG_PATH)


def test_a_token_chosen_for_another_organization_than_the_endpoints_is_401(resource, user, public_app, mint_token):
    organization("acme", user)
    other = organization("globex", user)
    token = mint_token(user, public_app, resource=ORG_URI)
    bind(token, other)
    assert_invalid_token(who(token, ORG_PATH), ORG_PATH)


def test_deactivating_the_organization_refuses_its_cached_tokens_at_once(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    shared = mint_token(user, public_app, resource=resource.uri)
    bind(shared, acme)
    assert structured(who(shared))["organization"] == "acme"  # cached now
    acme.is_active = False
    acme.save()
    assert_invalid_token(who(shared))


def test_deactivating_the_organization_closes_its_endpoint(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    token = mint_token(user, public_app, resource=ORG_URI)
    assert structured(who(token, ORG_PATH))["organization"] == "acme"
    acme.is_active = False
    acme.save()
    response = who(token, ORG_PATH)
    assert response.status_code == 404
    assert response.json()["error"] == {"code": -32600, "message": "Not Found: no MCP endpoint at this URL"}


@pytest.mark.parametrize("pattern", ["shared", "endpoint"])
def test_a_removed_member_is_refused_at_once(resource, user, public_app, mint_token, pattern):
    acme = organization("acme", user)
    if pattern == "shared":
        token, path = mint_token(user, public_app, resource=resource.uri), "/mcp"
        bind(token, acme)
    else:
        token, path = mint_token(user, public_app, resource=ORG_URI), ORG_PATH
    assert structured(who(token, path))["organization"] == "acme"
    OrganizationMembership.objects.filter(organization=acme, user=user).delete()
    assert_invalid_token(who(token, path), path)


def test_a_new_member_is_accepted_at_once(resource, user, public_app, mint_token):
    acme = organization("acme")
    token = mint_token(user, public_app, resource=ORG_URI)
    assert_invalid_token(who(token, ORG_PATH), ORG_PATH)
    OrganizationMembership.objects.create(organization=acme, user=user)
    assert structured(who(token, ORG_PATH))["organization"] == "acme"


def test_the_principal_is_read_without_a_query_once_cached(resource, user, public_app, mint_token):
    acme = organization("acme", user)
    factory = RequestFactory()
    for token, uri in (
        (mint_token(user, public_app, resource=ORG_URI), ORG_URI),
        (mint_token(user, public_app, resource=resource.uri), resource.uri),
    ):
        if uri == resource.uri:
            bind(token, acme)
        request = factory.post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
        first = authenticate_bearer(request, resource_by_uri(uri))
        assert first.organization.pk == acme.pk
        with CaptureQueriesContext(connection) as queries:
            again = authenticate_bearer(request, resource_by_uri(uri))
        assert [q["sql"] for q in queries.captured_queries if "revocationstamp" not in q["sql"]] == []
        assert again.organization.pk == acme.pk and again.organization.slug == "acme"


def test_a_warm_session_call_sends_no_query_however_many_organizations(
    resource, user, other_user, public_app, mint_token
):
    """Issue 31: a 2025-11-25 ``tools/call`` in a warm session, with many organizations (each with
    its endpoint, a member and approved clients), reads its token, resource, organization and
    session from the caches: no query (``bench/organizations.py --in-process --legacy --wire``
    lists the same on 10,000 organizations)."""
    acme = organization("acme", user)
    others = Organization.objects.bulk_create([Organization(slug=f"org-{n:03d}", name=f"Org {n}") for n in range(300)])
    ProtectedResource.objects.bulk_create(
        [
            ProtectedResource(uri=endpoint_uri(org.slug), name=org.name, scopes=resource.scopes, organization=org)
            for org in others
        ]
    )
    OrganizationMembership.objects.bulk_create(
        [OrganizationMembership(organization=org, user=other_user) for org in others]
    )
    Application = get_application_model()
    clients = Application.objects.bulk_create(
        [
            Application(name=f"c{n}", client_type="public", authorization_grant_type="authorization-code")
            for n in range(600)
        ]
    )
    OrganizationClient.objects.bulk_create(
        [
            OrganizationClient(
                organization=others[n // 2], application=client, status=OrganizationClient.Status.APPROVED
            )
            for n, client in enumerate(clients)
        ]
    )
    bump_resource_generation()
    token = mint_token(user, public_app, resource=resource.uri)
    bind(token, acme)
    client = Client()
    session = initialize(client, "/mcp", token)
    call = {"name": "who", "arguments": {}}
    assert structured(legacy(client, "/mcp", token, session, "tools/call", call))["organization"] == "acme"
    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            assert structured(legacy(client, "/mcp", token, session, "tools/call", call))["organization"] == "acme"
    assert [q["sql"] for q in queries.captured_queries if "revocationstamp" not in q["sql"]] == []


def test_a_machine_token_acts_for_an_organization_only_while_it_approves_the_client(resource, service, mint_token):
    acme = organization("acme")
    application, _ = service
    token = mint_token(None, application, resource=ORG_URI)
    request = RequestFactory().post(ORG_PATH, HTTP_AUTHORIZATION=f"Bearer {token}")
    with pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(request, resource_by_uri(ORG_URI))
    assert (refused.value.status, refused.value.error) == (401, "invalid_token")
    approval = OrganizationClient.objects.create(
        organization=acme, application=application, status=OrganizationClient.Status.APPROVED
    )
    principal = authenticate_bearer(request, resource_by_uri(ORG_URI))
    assert principal.is_machine and principal.organization.slug == "acme"
    approval.status = OrganizationClient.Status.DENIED
    approval.save()
    with pytest.raises(BearerChallenge):
        authenticate_bearer(request, resource_by_uri(ORG_URI))


def test_a_machine_token_of_an_inactive_organization_is_refused(resource, service, mint_token):
    acme = organization("acme")
    application, _ = service
    OrganizationClient.objects.create(organization=acme, application=application, status="approved")
    token = mint_token(None, application, resource=resource.uri)
    bind(token, acme)
    Organization.objects.filter(pk=acme.pk).update(is_active=False)
    bump_resource_generation()  # a bulk update() sends no signal
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    with pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(request, resource)
    assert (refused.value.status, refused.value.error) == (401, "invalid_token")
