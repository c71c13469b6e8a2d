"""The consent page's organization part (mcp_oauth.authorization_server.pages.organization_gate): the choice
among the user's organizations on a shared endpoint, a per-organization endpoint's membership, and
the pending-approval / refused pages."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_grant_model

from mcp_oauth.models import AuditEvent, Consent, OrganizationClient, TokenOrganization
from tests.support.oauth_helpers import redirect_query
from tests.support.organization_fixtures import acme, globex  # noqa: F401 - fixtures
from tests.support.organization_helpers import (
    add_member,
    answer,
    code_for,
    consent_page,
    make_organization,
    organization_endpoint,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


def test_the_consent_page_offers_the_users_organizations(logged_in, public_app, acme, globex):
    make_organization("initech", "Initech")  # not the user's
    page, _params, _ = consent_page(logged_in, public_app)
    html = page.content.decode()
    assert page.status_code == 200
    assert html.count('type="radio" name="organization"') == 2
    assert f'value="{acme.pk}" data-slug="acme" required>' in html
    assert f'value="{globex.pk}" data-slug="globex" required>' in html
    assert "Acme Corp" in html and "Globex" in html and "Initech" not in html


def test_one_organization_is_preselected(logged_in, public_app, acme):
    page, _params, _ = consent_page(logged_in, public_app)
    assert f'value="{acme.pk}" data-slug="acme" required checked>' in page.content.decode()


def test_no_organization_no_choice(logged_in, public_app):
    page, params, _ = consent_page(logged_in, public_app)
    assert 'name="organization"' not in page.content.decode()
    response = answer(logged_in, page, params)
    assert "code" in redirect_query(response)
    assert Consent.objects.get().organization is None


def test_inactive_organizations_are_not_offered(logged_in, user, public_app, acme):
    dormant = make_organization("dormant", "Dormant", is_active=False)
    add_member(user, dormant)
    page, _params, _ = consent_page(logged_in, public_app)
    assert page.content.decode().count('name="organization"') == 1


def test_the_same_client_consented_for_two_organizations(logged_in, public_app, acme, globex):
    code_for(logged_in, public_app, acme)
    code_for(logged_in, public_app, globex)
    assert sorted(Consent.objects.values_list("organization__slug", flat=True)) == ["acme", "globex"]
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.CONSENT_GRANTED).order_by("pk").last()
    assert event.organization == globex and event.detail["organization"] == "globex"


@pytest.mark.parametrize("value", [None, "", "abc", "1 2", "99999999", "-1", "１"])
def test_a_missing_or_foreign_choice_is_a_400_page_and_no_code(logged_in, public_app, acme, value):
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, value)
    assert response.status_code == 400 and "Location" not in response
    assert b"invalid_request" in response.content
    assert not get_grant_model().objects.exists() and not Consent.objects.exists()


def test_two_choices_are_refused(logged_in, public_app, acme, globex):
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, [str(acme.pk), str(globex.pk)])
    assert response.status_code == 400 and not get_grant_model().objects.exists()


def test_cancel_needs_no_choice(logged_in, public_app, acme):
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, allow=False)
    assert redirect_query(response)["error"] == "access_denied"


def test_per_organization_endpoint_shows_its_organization_without_a_choice(logged_in, public_app, acme, globex):
    endpoint = organization_endpoint(acme)
    page, params, _ = consent_page(logged_in, public_app, resource=endpoint.uri)
    html = page.content.decode()
    assert 'name="organization"' not in html
    assert 'id="organization" data-organization="acme"' in html
    response = answer(logged_in, page, params, str(globex.pk))  # ignored: the endpoint decides
    code = redirect_query(response)["code"]
    assert TokenOrganization.objects.get().organization == acme and code


def test_per_organization_endpoint_of_an_organization_the_user_is_not_in(logged_in, public_app):
    initech = make_organization("initech", "Initech")
    endpoint = organization_endpoint(initech)
    page, _params, _ = consent_page(logged_in, public_app, resource=endpoint.uri)
    assert page.status_code == 403 and "Location" not in page
    assert b"You are not a member of Initech" in page.content
    assert page["X-Frame-Options"] == "DENY"


def test_pending_approval_page_records_the_request(logged_in, user, public_app):
    acme = make_organization("acme", "Acme Corp", client_approval_required=True)
    add_member(user, acme)
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, acme.pk)
    assert response.status_code == 403 and "Location" not in response
    html = response.content.decode()
    assert 'data-outcome="pending"' in html
    assert "An administrator of Acme Corp must approve this application" in html
    row = OrganizationClient.objects.get()
    assert (row.organization, row.application, row.status, row.requested_by) == (acme, public_app, "pending", user)
    assert not get_grant_model().objects.exists() and not Consent.objects.exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_CLIENT_REQUESTED)
    assert event.organization == acme and event.detail["new_request"] is True and event.user == user
    # The consent page's security headers.
    assert response["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert response["Cache-Control"].startswith("max-age=0") or "no-store" in response["Cache-Control"]


def test_pending_on_a_per_organization_endpoint_is_asked_for_by_the_answer(logged_in, user, public_app):
    """The consent page says approval is needed; a link alone files no request (a GET has no side
    effect), the user's answer does, once."""
    acme = make_organization("acme", "Acme Corp", client_approval_required=True)
    add_member(user, acme)
    endpoint = organization_endpoint(acme)
    page, params, _ = consent_page(logged_in, public_app, resource=endpoint.uri)
    assert page.status_code == 200 and b'id="organization-pending"' in page.content
    assert not OrganizationClient.objects.exists()
    response = answer(logged_in, page, params)
    assert response.status_code == 403 and b'data-outcome="pending"' in response.content
    page, params, _ = consent_page(logged_in, public_app, resource=endpoint.uri)
    answer(logged_in, page, params)
    assert OrganizationClient.objects.count() == 1
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.ORGANIZATION_CLIENT_REQUESTED).order_by("pk")
    assert [e.detail["new_request"] for e in events] == [True, False]
    assert not get_grant_model().objects.exists()


def test_denied_on_a_per_organization_endpoint_replaces_the_consent_page(logged_in, public_app, acme):
    OrganizationClient.objects.create(organization=acme, application=public_app, status="denied")
    page, _params, _ = consent_page(logged_in, public_app, resource=organization_endpoint(acme).uri)
    assert page.status_code == 403 and b'data-outcome="denied"' in page.content


def test_approved_client_gets_the_consent_page(logged_in, user, public_app):
    acme = make_organization("acme", "Acme Corp", client_approval_required=True)
    add_member(user, acme)
    OrganizationClient.objects.create(organization=acme, application=public_app, status="approved")
    code, _ = code_for(logged_in, public_app, acme)
    assert code


def test_denied_client_page(logged_in, user, public_app, acme):
    OrganizationClient.objects.create(organization=acme, application=public_app, status="denied")
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, acme.pk)
    assert response.status_code == 403 and b'data-outcome="denied"' in response.content
    assert b"Acme Corp does not allow this application" in response.content
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ORGANIZATION_CLIENT_REFUSED)
    assert event.detail["reason"] == "denied_by_admin" and event.organization == acme


def test_dynamic_clients_refused_by_the_organization(logged_in, user, public_app, settings):
    public_app.registration_source = "dcr"
    public_app.save()
    acme = make_organization("acme", "Acme Corp", allow_dynamic_registration=False)
    add_member(user, acme)
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, acme.pk)
    assert response.status_code == 403 and b'data-outcome="refused"' in response.content
    assert b"does not accept applications that registered themselves dynamically" in response.content


def test_the_template_is_overridable(logged_in, user, public_app, settings, tmp_path):
    (tmp_path / "mine.html").write_text("custom {{ outcome }} {{ organization.slug }}")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [str(tmp_path), *settings.TEMPLATES[0]["DIRS"]]}]
    settings.MCP_OAUTH = {**getattr(settings, "MCP_OAUTH", {}), "ORGANIZATION_CLIENT_TEMPLATE": "mine.html"}
    acme = make_organization("acme", client_approval_required=True)
    add_member(user, acme)
    page, params, _ = consent_page(logged_in, public_app)
    response = answer(logged_in, page, params, acme.pk)
    assert response.status_code == 403 and response.content.decode().strip() == "custom pending acme"


def test_skip_authorization_on_a_per_organization_endpoint_records_its_organization(logged_in, public_app, acme):
    public_app.skip_authorization = True
    public_app.save()
    endpoint = organization_endpoint(acme)
    page, _params, _ = consent_page(logged_in, public_app, resource=endpoint.uri)
    assert "code" in redirect_query(page)
    assert TokenOrganization.objects.get().organization == acme
    consent = Consent.objects.get()
    assert consent.organization == acme
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CONSENT_GRANTED)
    assert event.detail["automatic"] is True and event.organization == acme


def test_skip_authorization_still_asks_a_user_with_organizations_to_choose(logged_in, public_app, acme):
    public_app.skip_authorization = True
    public_app.save()
    page, _params, _ = consent_page(logged_in, public_app)
    assert page.status_code == 200 and b'name="organization"' in page.content


def test_skip_authorization_does_not_skip_the_approval(logged_in, user, public_app):
    public_app.skip_authorization = True
    public_app.save()
    acme = make_organization("acme", "Acme Corp", client_approval_required=True)
    add_member(user, acme)
    page, params, _ = consent_page(logged_in, public_app, resource=organization_endpoint(acme).uri)
    assert page.status_code == 200 and b'id="organization-pending"' in page.content
    assert not get_grant_model().objects.exists()
    response = answer(logged_in, page, params)
    assert response.status_code == 403 and b'data-outcome="pending"' in response.content
    assert not get_grant_model().objects.exists()
