"""Attacks on the per-organization policy of the authorization server: a tampered organization choice,
an organization the user left, an ID-JAG of organization A used for B, a refresh token of A used for
B, a code obtained before approval was required, and the validator's own request attributes smuggled
in as parameters. Each refusal leaves no grant and no token."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from mcp_oauth.models import Consent, OrganizationClient, OrganizationMembership, TokenOrganization
from tests.mcp_oauth.authorization_server.enterprise_identity.test_jwt_bearer import (  # noqa: F401 - fixtures
    assert_error,
    chat_client,
    id_jag,
    idp_key,
    provider,
    redeem,
)
from tests.support.oauth_helpers import redirect_query, token_request
from tests.support.organization_fixtures import acme, globex  # noqa: F401 - fixtures
from tests.support.organization_helpers import (
    add_member,
    answer,
    code_for,
    consent_page,
    make_organization,
    organization_endpoint,
    token_organization_id,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


def assert_nothing_granted():
    assert not get_grant_model().objects.exists()
    assert not Consent.objects.exists()
    assert not get_access_token_model().objects.exists()


def test_tampered_choice_of_another_users_organization(logged_in, public_app, acme, other_user):
    initech = make_organization("initech", "Initech")
    add_member(other_user, initech)
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, initech.pk)
    assert response.status_code == 400 and "Location" not in response
    assert_nothing_granted()


def test_choice_of_an_organization_the_user_left_after_the_page(logged_in, user, public_app, acme, globex):
    page, params, _ = consent_page(logged_in, public_app)
    assert f'value="{globex.pk}"'.encode() in page.content
    OrganizationMembership.objects.filter(user=user, organization=globex).delete()
    response = answer(logged_in, page, params, globex.pk)
    assert response.status_code == 400 and "Location" not in response
    assert_nothing_granted()


def test_choice_of_an_organization_deactivated_after_the_page(logged_in, public_app, acme, globex):
    page, params, _ = consent_page(logged_in, public_app)
    globex.is_active = False
    globex.save()
    assert answer(logged_in, page, params, globex.pk).status_code == 400
    assert_nothing_granted()


@pytest.mark.parametrize("name", ["mcp_organization_id", "_mcp_trust_recorded"])
def test_organization_smuggled_in_the_authorization_url(logged_in, public_app, other_user, name):
    """oauthlib's request answers attribute lookups from the query string: a parameter named like the
    validator's own state is refused (redirected invalid_request), never read."""
    initech = make_organization("initech", "Initech")
    add_member(other_user, initech)
    page, _params, _ = consent_page(logged_in, public_app, **{name: str(initech.pk)})
    query = redirect_query(page)
    assert query["error"] == "invalid_request" and "code" not in query
    assert not TokenOrganization.objects.exists()
    assert_nothing_granted()


def test_id_jag_of_organization_a_never_yields_a_token_for_b(client, provider, chat_client, idp_key, resource, user):
    acme, globex = make_organization("acme"), make_organization("globex")
    add_member(user, acme)
    add_member(user, globex)  # the user is even a member of both
    provider.organization = acme
    provider.save()
    globex_endpoint = organization_endpoint(globex)
    provider.allowed_resources.add(globex_endpoint)
    app, secret = chat_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, globex_endpoint.uri)), "invalid_grant")
    # Asking for B's endpoint with the resource parameter while the ID-JAG names the shared one.
    mixed = redeem(client, app, secret, id_jag(idp_key, app, resource.uri), resource=globex_endpoint.uri)
    assert_error(mixed, "invalid_target")
    # On the shared endpoint its token acts for A, never B.
    response = redeem(client, app, secret, id_jag(idp_key, app, resource.uri))
    assert token_organization_id(response.json()["access_token"]) == acme.pk


def test_refresh_token_of_a_used_for_bs_endpoint(logged_in, public_app, acme, globex):
    globex_endpoint = organization_endpoint(globex)
    code, verifier = code_for(logged_in, public_app, acme)
    body = token_request(logged_in, public_app, code, verifier).json()
    response = logged_in.post(
        "/oauth/token",
        {
            "grant_type": "refresh_token",
            "refresh_token": body["refresh_token"],
            "client_id": public_app.client_id,
            "resource": globex_endpoint.uri,
        },
    )
    assert response.status_code == 400 and response.json()["error"] in ("invalid_target", "invalid_grant")
    assert get_access_token_model().objects.count() == 1
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 1
    # Refreshed on its own endpoint it stays A's.
    again = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": body["refresh_token"], "client_id": public_app.client_id},
    ).json()
    assert token_organization_id(again["access_token"]) == acme.pk


def test_code_for_a_exchanged_for_bs_endpoint(logged_in, public_app, acme, globex):
    globex_endpoint = organization_endpoint(globex)
    code, verifier = code_for(logged_in, public_app, acme)
    response = token_request(logged_in, public_app, code, verifier, resource=globex_endpoint.uri)
    assert response.status_code == 400 and response.json()["error"] in ("invalid_target", "invalid_grant")
    assert not get_access_token_model().objects.exists()


def test_code_of_bs_endpoint_bound_to_b_even_if_a_is_posted(logged_in, public_app, acme, globex):
    globex_endpoint = organization_endpoint(globex)
    page, params, verifier = consent_page(logged_in, public_app, resource=globex_endpoint.uri)
    code = redirect_query(answer(logged_in, page, params, acme.pk))["code"]
    body = token_request(logged_in, public_app, code, verifier).json()
    assert token_organization_id(body["access_token"]) == globex.pk


def test_pending_client_with_a_code_obtained_before_approval_was_required(logged_in, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    acme.client_approval_required = True
    acme.save()
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert "must approve" in response.json()["error_description"]
    assert not get_access_token_model().objects.exists()
    assert not OrganizationClient.objects.exists()  # the token endpoint records no request for the member


def test_pending_client_cannot_refresh_either(logged_in, public_app, acme):
    code, verifier = code_for(logged_in, public_app, acme)
    body = token_request(logged_in, public_app, code, verifier).json()
    acme.client_approval_required = True
    acme.save()
    response = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": body["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    OrganizationClient.objects.create(organization=acme, application=public_app, status="approved")
    again = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": body["refresh_token"], "client_id": public_app.client_id},
    )
    assert again.status_code == 200, again.content


@pytest.mark.parametrize(
    "name", ["_mcp_assertion_resource", "_mcp_grant_event", "_mcp_idp_organization_id", "mcp_organization_id"]
)
def test_the_validators_own_attributes_cannot_be_sent_as_parameters(logged_in, public_app, acme, name):
    code, verifier = code_for(logged_in, public_app, acme)
    response = token_request(logged_in, public_app, code, verifier, **{name: "https://evil.example/mcp"})
    assert response.status_code == 400 and response.json()["error"] == "invalid_request"
    assert not get_access_token_model().objects.exists()
