"""A hostile member at the pages of the organizations' authorization flow: the consent form's
fields tampered with (reserved parameter names in the POST's query and body, NUL bytes,
organization values of every odd shape), and the connected-apps page's per-organization revoke.

Every answer is a page or the redirect the spec names (400 without ``Location`` for a form that
does not say what it means), never a 500, and nothing is granted or revoked by a tampered value.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_grant_model

from mcp_oauth.models import Consent, TokenOrganization
from tests.support.oauth_helpers import hidden_fields, redirect_query, token_request
from tests.support.organization_fixtures import acme  # noqa: F401 - fixtures
from tests.support.organization_helpers import add_member, code_for, consent_page, make_organization

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(user, resource):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def initech(other_user):
    organization = make_organization("initech", "Initech")
    add_member(other_user, organization)
    return organization


def _form(page, organization) -> dict:
    form = hidden_fields(page.content.decode())
    form.pop("organization", None)
    form["allow"] = "Authorize"
    form["organization"] = str(organization.pk)
    return form


@pytest.mark.parametrize("name", ["mcp_organization_id", "_mcp_trust_recorded", "_mcp_cimd_document"])
def test_a_reserved_name_in_the_query_of_the_consent_post_is_refused(logged_in, public_app, acme, initech, name):
    page, params, _ = consent_page(logged_in, public_app)
    response = logged_in.post("/oauth/authorize?" + urlencode({**params, name: str(initech.pk)}), _form(page, acme))
    query = redirect_query(response)
    assert query["error"] == "invalid_request" and "code" not in query
    assert not get_grant_model().objects.exists() and not Consent.objects.exists()


@pytest.mark.parametrize("name", ["mcp_organization_id", "_mcp_trust_recorded", "_mcp_idp_organization_id"])
def test_a_reserved_name_in_the_body_of_the_consent_post_is_never_read(logged_in, public_app, acme, initech, name):
    """The POST body is not oauthlib's request (DOT hands it only the query), so a reserved name
    there changes nothing: the code acts for the organization chosen, never the smuggled one."""
    page, params, verifier = consent_page(logged_in, public_app)
    response = logged_in.post("/oauth/authorize?" + urlencode(params), {**_form(page, acme), name: str(initech.pk)})
    code = redirect_query(response)["code"]
    assert TokenOrganization.objects.get(token_kind="code").organization_id == acme.pk
    body = token_request(logged_in, public_app, code, verifier).json()
    assert TokenOrganization.objects.get(token_kind="access_token").organization_id == acme.pk
    assert body["token_type"] in ("Bearer", "DPoP")


@pytest.mark.parametrize("field", ["client_id", "redirect_uri", "state", "scope", "resource", "organization"])
def test_a_nul_byte_in_a_consent_field_is_never_a_500(logged_in, public_app, acme, field):
    page, params, _ = consent_page(logged_in, public_app)
    form = _form(page, acme)
    form[field] = form.get(field, "") + "\x00"
    response = logged_in.post("/oauth/authorize?" + urlencode(params), form)
    assert response.status_code in (302, 303, 400), (response.status_code, response.content[:300])
    if response.status_code != 400:
        assert "code" not in redirect_query(response)
    assert not get_access_token_model().objects.exists()


@pytest.mark.parametrize(
    "value",
    ["99999999999999999999", "9" * 5000, "9223372036854775808", "-1", "0x1", "١", "\x00", " 1", "1.0", "", "null"],
)
def test_connected_apps_revoke_with_an_odd_organization_value_revokes_nothing(logged_in, public_app, acme, value):
    code_for(logged_in, public_app, acme)
    response = logged_in.post(
        "/oauth/connected-apps/", {"action": "revoke", "client_id": public_app.client_id, "organization": value}
    )
    assert response.status_code == 400
    assert Consent.objects.get().revoked_at is None


@pytest.mark.parametrize("client_id", ["a\x00b", "\x00", "x" * 2001])
def test_connected_apps_revoke_of_an_unrepresentable_client_id_is_400_not_500(logged_in, public_app, acme, client_id):
    code_for(logged_in, public_app, acme)
    response = logged_in.post("/oauth/connected-apps/", {"action": "revoke", "client_id": client_id})
    assert response.status_code == 400
    assert b"not connected to your account" in response.content
    assert Consent.objects.get().revoked_at is None


def test_connected_apps_revoke_of_another_users_organization_revokes_nothing(
    logged_in, other_user, public_app, acme, initech
):
    other = Client()
    other.force_login(other_user)
    code_for(other, public_app, initech)
    code_for(logged_in, public_app, acme)
    response = logged_in.post(
        "/oauth/connected-apps/",
        {"action": "revoke", "client_id": public_app.client_id, "organization": str(initech.pk)},
    )
    assert response.status_code == 400
    assert Consent.objects.filter(revoked_at__isnull=True).count() == 2


@pytest.fixture
def pending_endpoint(acme, resource):
    from mcp_oauth.models import ProtectedResource

    acme.client_approval_required = True
    acme.save()
    return ProtectedResource.objects.get(organization=acme)


def test_declining_on_a_pending_organizations_page_files_no_approval_request(logged_in, public_app, pending_endpoint):
    from mcp_oauth.models import OrganizationClient

    page, params, _ = consent_page(logged_in, public_app, resource=pending_endpoint.uri)
    assert page.status_code == 200
    assert not OrganizationClient.objects.exists()  # the page alone files nothing
    form = hidden_fields(page.content.decode())
    form.pop("allow", None)
    response = logged_in.post("/oauth/authorize?" + urlencode(params), form)
    assert redirect_query(response)["error"] == "access_denied"
    assert not OrganizationClient.objects.exists()


def test_a_tampered_resource_on_the_pending_page_cannot_escape_to_the_shared_endpoint(
    logged_in, public_app, pending_endpoint, acme, resource
):
    """The consent form's hidden resource switched from the organization's endpoint to the shared
    one, choosing the organization: the shared endpoint's rules apply (acme still needs approval),
    never a code acting for acme without it."""
    from mcp_oauth.models import OrganizationClient

    page, params, _ = consent_page(logged_in, public_app, resource=pending_endpoint.uri)
    form = _form(page, acme)
    form["resource"] = resource.uri
    response = logged_in.post("/oauth/authorize?" + urlencode(params), form)
    assert response.status_code == 403 and "Location" not in response
    assert not get_grant_model().objects.exists()
    assert OrganizationClient.objects.get().status == "pending"
