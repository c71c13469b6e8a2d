"""Attacks by an organization admin of A on organization B through the Django admin (issue #31):
lists, search, the autocomplete endpoint, raw-id and "add another" pop-ups, object URLs (change,
history, delete: 404, as for an object that does not exist), forged POSTs (another organization's
id, another organization's membership, read-only fields, list_editable rows), ``_changelist_filters``
and filters naming B, and bulk actions over a forged selection. Each attack is answered without
showing or touching anything of B."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from mcp_oauth.models import (
    Consent,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    McpTask,
    Organization,
    OrganizationClient,
    OrganizationMembership,
    ToolCallRecord,
    TrustRule,
)
from tests.support.organization_admin import JWKS, admin_url, build
from tests.support.organization_admin import SCREENS as SCREEN_PERMISSIONS

pytestmark = pytest.mark.django_db

#: The screens of an organization admin (tests/support/organization_admin.py), by name.
SCREENS = {name: model for name, (model, _) in SCREEN_PERMISSIONS.items()}
#: Text of B that must never reach A's admin.
B_TEXT = (b"Organization B", b"org-b", b"client-b", b"member-b", b"Client of B", b"tool_b", b"IdP of B", b"report_b")


@pytest.fixture
def world(resource):
    return build(resource)


@pytest.fixture
def ann(client, world):
    client.force_login(world.a.admin)
    return client


def _no_b(response):
    for text in B_TEXT:
        assert text not in response.content, text


def _pks(response):
    return {obj.pk for obj in response.context["cl"].result_list}


# --- object URLs -------------------------------------------------------------------------


@pytest.mark.parametrize("view", ["change", "history", "delete"])
@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_bs_object_by_url_is_a_404_like_an_object_that_does_not_exist(ann, world, screen, view):
    b_object = world.b.rows()[screen]
    response = ann.get(admin_url(b_object, view))
    assert response.status_code == 404
    _no_b(response)
    missing = ann.get(admin_url(SCREENS[screen], view, 987654))
    assert missing.status_code == 404


@pytest.mark.parametrize("screen", ["rule", "idp", "membership"])
def test_posting_to_bs_delete_page_deletes_nothing(ann, world, screen):
    b_object = world.b.rows()[screen]
    assert ann.post(admin_url(b_object, "delete"), {"post": "yes"}).status_code == 404
    assert type(b_object).objects.filter(pk=b_object.pk).exists()


def test_the_site_wide_rows_are_not_an_organization_admins(ann, world):
    assert ann.get(admin_url(world.site_rule, "change")).status_code == 404
    assert ann.get(admin_url(world.site_resource, "change")).status_code == 404
    assert world.site_rule.pk not in _pks(ann.get(admin_url(TrustRule)))


def test_the_popup_change_page_of_bs_organization_is_a_404(ann, world):
    url = admin_url(world.b.organization, "change") + "?_to_field=id&_popup=1"
    assert ann.get(url).status_code == 404


# --- lists, search, filters -----------------------------------------------------------------


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_searching_for_b_finds_nothing(ann, world, screen):
    for term in ("b", "org-b", "client-b", "member-b", "Organization B"):
        response = ann.get(admin_url(SCREENS[screen]), {"q": term})
        assert response.status_code == 200
        assert not (_pks(response) & {world.b.rows()[screen].pk})
        for text in B_TEXT:  # the search box shows the term typed, nothing else of B
            assert text == term.encode() or text not in response.content.replace(term.encode(), b""), text


@pytest.mark.parametrize("screen", sorted(set(SCREENS) - {"organization"}))  # the organizations list has none
def test_the_organization_filter_naming_b_shows_nothing(ann, world, screen):
    response = ann.get(admin_url(SCREENS[screen]), {"organization": world.b.organization.pk})
    assert response.status_code == 200
    assert _pks(response) == set()
    _no_b(response)


def test_a_lookup_naming_bs_organization_finds_nothing(ann, world):
    response = ann.get(admin_url(Consent), {"organization__id__exact": world.b.organization.pk})
    assert response.status_code == 200 and _pks(response) == set()
    _no_b(response)
    response = ann.get(admin_url(Consent), {"organization__slug": "org-b"})
    assert response.status_code == 400  # not a lookup the list offers (DisallowedModelAdminLookup)


def test_facets_count_nothing_of_b(ann, world):
    response = ann.get(admin_url(ToolCallRecord), {"_facets": "1"})
    assert response.status_code == 200
    _no_b(response)
    assert b"tool_a" in response.content


def test_changelist_filters_naming_b_keep_to_as_rows(ann, world):
    filters = urlencode({"organization": world.b.organization.pk})
    url = admin_url(world.a.rule, "change") + "?" + urlencode({"_changelist_filters": filters})
    page = ann.get(url)
    assert page.status_code == 200
    _no_b(page)
    response = ann.post(
        url,
        {
            "organization": world.a.organization.pk,
            "target": "client_id_host",
            "pattern": "*.a.example.com",
            "registration_source": "",
            "action": "allow",
            "enabled": "on",
            "note": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    assert _pks(response) == set()
    _no_b(response)


# --- autocomplete and pop-ups -------------------------------------------------------------


def _autocomplete(client, model_name, field_name, term=""):
    query = {"app_label": "mcp_oauth", "model_name": model_name, "field_name": field_name, "term": term}
    return client.get("/admin/autocomplete/", query)


@pytest.mark.parametrize(
    "model_name", ["trustrule", "organizationmembership", "organizationclient", "enterpriseidentityprovider"]
)
def test_the_organization_autocomplete_offers_only_as_organization(ann, world, model_name):
    for term in ("", "Organization", "org-b", "B"):
        response = _autocomplete(ann, model_name, "organization", term)
        assert response.status_code == 200
        ids = {row["id"] for row in json.loads(response.content)["results"]}
        assert ids <= {str(world.a.organization.pk)}
        _no_b(response)


@pytest.mark.parametrize(
    ("model_name", "field_name"),
    [("organizationmembership", "user"), ("organizationclient", "application"), ("consent", "user")],
)
def test_the_autocomplete_of_users_and_clients_is_refused(ann, world, model_name, field_name):
    response = _autocomplete(ann, model_name, field_name, "b")
    assert response.status_code == 403
    _no_b(response)


def test_the_raw_id_popup_lists_only_as_rows(ann, world):
    response = ann.get(admin_url(Organization) + "?_to_field=id&_popup=1")
    assert response.status_code == 200
    assert _pks(response) == {world.a.organization.pk}
    _no_b(response)
    response = ann.get(admin_url(EnterpriseIdentityProvider) + "?_to_field=id&_popup=1&q=IdP")
    assert _pks(response) == {world.a.idp.pk}


def test_the_popups_of_models_without_an_organization_are_refused(ann, world):
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_application_model

    for model in (get_user_model(), get_application_model()):
        assert ann.get(admin_url(model) + "?_to_field=id&_popup=1").status_code == 403
        assert ann.get(admin_url(model, "add") + "?_to_field=id&_popup=1").status_code == 403


def test_the_add_another_popup_of_an_organization_is_refused(ann, world):
    assert ann.get(admin_url(Organization, "add") + "?_to_field=id&_popup=1").status_code == 403


def test_an_add_form_prefilled_with_bs_organization_does_not_show_it(ann, world):
    response = ann.get(admin_url(TrustRule, "add"), {"organization": world.b.organization.pk})
    assert response.status_code == 200
    _no_b(response)


# --- forged POSTs ---------------------------------------------------------------------------


def _rule(organization):
    return {
        "organization": organization,
        "target": "client_id_host",
        "pattern": "*.forged.example.com",
        "registration_source": "",
        "action": "allow",
        "enabled": "on",
        "note": "forged",
    }


@pytest.mark.parametrize("organization", ["b", "", "none", "999999", "x"])
def test_a_rule_cannot_be_created_in_b_or_site_wide(ann, world, organization):
    value = {"b": world.b.organization.pk, "": "", "none": None, "999999": 999999, "x": "x"}[organization]
    data = _rule(value)
    if value is None:
        del data["organization"]
    response = ann.post(admin_url(TrustRule, "add"), data)
    assert response.status_code == 200  # the form again, with its error
    assert response.context["adminform"].form.errors["organization"]
    assert not TrustRule.objects.filter(pattern="*.forged.example.com").exists()


def test_as_rule_cannot_be_moved_to_b(ann, world):
    response = ann.post(admin_url(world.a.rule, "change"), _rule(world.b.organization.pk))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["organization"]
    world.a.rule.refresh_from_db()
    assert world.a.rule.organization_id == world.a.organization.pk


def test_a_membership_cannot_be_created_in_b(ann, world):
    data = {"organization": world.b.organization.pk, "user": "member-a", "role": "admin"}
    response = ann.post(admin_url(OrganizationMembership, "add"), data)
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["organization"]
    assert not OrganizationMembership.objects.filter(organization=world.b.organization, user=world.a.member).exists()


def test_an_idp_cannot_allow_bs_client_or_resource(ann, world):
    data = {
        "name": "Forged",
        "issuer": "https://forged.example.com",
        "organization": world.a.organization.pk,
        "enabled": "on",
        "jwks_uri": "",
        "jwks": json.dumps(JWKS),
        "algorithms": "ES256",
        "allowed_clients": [world.b.client.pk],
        "allowed_resources": [world.b.resource.pk],
        "allowed_scopes": "",
        "user_policy": "linked",
        "identities-TOTAL_FORMS": "0",
        "identities-INITIAL_FORMS": "0",
    }
    response = ann.post(admin_url(EnterpriseIdentityProvider, "add"), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "allowed_clients" in errors and "allowed_resources" in errors
    assert not EnterpriseIdentityProvider.objects.filter(issuer="https://forged.example.com").exists()


def _organization_form(world, **overrides):
    org = world.a.organization
    data = {
        "client_approval_required": "on",
        "allow_dynamic_registration": "unknown",
        "allow_client_id_metadata_documents": "unknown",
        "enabled_tools": "",
        "allowed_scopes": "",
        "access_token_lifetime": "",
        "refresh_token_lifetime": "",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        # read-only to an organization admin: ignored
        "slug": "stolen",
        "name": "Renamed",
        "external_id": "tenant-b",
        "is_active": "",
    }
    data.update(overrides)
    return admin_url(org, "change"), data


def test_the_organizations_site_fields_ignore_a_forged_post(ann, world):
    url, data = _organization_form(world)
    response = ann.post(url, data)
    assert response.status_code == 302
    org = Organization.objects.get(pk=world.a.organization.pk)
    assert (org.slug, org.name, org.external_id, org.is_active) == ("org-a", "Organization A", "", True)
    assert org.client_approval_required is True


def test_the_membership_inline_cannot_take_bs_membership(ann, world):
    b_membership = world.b.membership
    url, data = _organization_form(world)
    data.update(
        {
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-0-id": b_membership.pk,
            "memberships-0-organization": world.a.organization.pk,
            "memberships-0-user": "member-b",
            "memberships-0-role": "admin",
            "memberships-0-DELETE": "on",
        }
    )
    ann.post(url, data)  # marked for deletion: a row the formset does not hold is left alone
    b_membership.refresh_from_db()
    assert (b_membership.organization_id, b_membership.role) == (world.b.organization.pk, "member")
    del data["memberships-0-DELETE"]
    ann.post(url, data)  # a row the formset does not hold is neither changed nor created
    b_membership.refresh_from_db()
    assert (b_membership.organization_id, b_membership.role) == (world.b.organization.pk, "member")
    assert OrganizationMembership.objects.filter(user=world.b.member).count() == 1


def test_the_list_editable_form_cannot_change_bs_rule(ann, world):
    world.b.rule.enabled = True
    world.b.rule.save()
    data = {
        "form-TOTAL_FORMS": "1",
        "form-INITIAL_FORMS": "1",
        "form-0-id": world.b.rule.pk,
        "form-0-enabled": "",
        "_save": "Save",
    }
    response = ann.post(admin_url(TrustRule), data)
    assert response.status_code == 200  # the list again, the forged row an error
    world.b.rule.refresh_from_db()
    assert world.b.rule.enabled is True


# --- bulk actions over a forged selection ---------------------------------------------------


def _act(client, model, action, pks, **extra):
    data = {"action": action, "_selected_action": [str(pk) for pk in pks], "index": 0, **extra}
    return client.post(admin_url(model), data)


def test_revoking_a_forged_selection_revokes_only_as_grants(ann, world):
    _act(ann, Consent, "revoke_consents", [world.a.consent.pk, world.b.consent.pk])
    world.a.consent.refresh_from_db()
    world.b.consent.refresh_from_db()
    assert world.a.consent.revoked_at is not None
    assert world.b.consent.revoked_at is None


def test_cancelling_a_forged_selection_leaves_bs_task(ann, world):
    _act(ann, McpTask, "cancel_tasks", [world.b.task.pk])
    world.b.task.refresh_from_db()
    assert world.b.task.status == McpTask.Status.WORKING and world.b.task.cancel_requested_at is None


@pytest.mark.parametrize("action", ["approve", "deny"])
def test_deciding_a_forged_selection_leaves_bs_decision(ann, world, action):
    _act(ann, OrganizationClient, action, [world.b.decision.pk], select_across="1")
    world.b.decision.refresh_from_db()
    world.a.decision.refresh_from_db()
    assert world.b.decision.status == "pending" and world.b.decision.decided_by is None
    assert world.a.decision.status == {"approve": "approved", "deny": "denied"}[action]  # select_across: A's rows


def test_deleting_a_forged_selection_deletes_nothing_of_b(ann, world):
    response = _act(ann, OrganizationMembership, "delete_selected", [world.b.membership.pk], post="yes")
    assert response.status_code in (200, 302)
    assert OrganizationMembership.objects.filter(pk=world.b.membership.pk).exists()
    response = _act(ann, TrustRule, "delete_selected", [world.b.rule.pk, world.site_rule.pk], post="yes")
    assert TrustRule.objects.filter(pk__in=[world.b.rule.pk, world.site_rule.pk]).count() == 2


def test_disabling_a_forged_selection_of_rules_leaves_b_and_the_site(ann, world):
    _act(ann, TrustRule, "disable_rules", [world.a.rule.pk, world.b.rule.pk, world.site_rule.pk])
    enabled = dict(TrustRule.objects.values_list("pk", "enabled"))
    assert enabled[world.a.rule.pk] is False
    assert enabled[world.b.rule.pk] is True and enabled[world.site_rule.pk] is True


def test_an_organization_admin_cannot_remove_or_demote_themselves(ann, world):
    own = OrganizationMembership.objects.get(user=world.a.admin, organization=world.a.organization)
    assert ann.get(admin_url(own, "delete")).status_code == 403
    _act(ann, OrganizationMembership, "delete_selected", [own.pk], post="yes")
    assert OrganizationMembership.objects.filter(pk=own.pk, role="admin").exists()
    response = ann.post(admin_url(own, "change"), {"role": "member"})
    assert response.status_code == 403
    own.refresh_from_db()
    assert own.role == "admin"


@pytest.mark.parametrize("policy", ["match_email", "create"])
def test_an_organization_admins_idp_cannot_match_or_create_users(ann, world, policy):
    """An IdP whose keys an organization admin holds could otherwise name any site user by e-mail."""
    url = admin_url(world.a.idp, "change")
    form = ann.get(url).context["adminform"].form
    assert [value for value, _label in form.fields["user_policy"].choices] == ["linked"]
    data = {
        "name": "IdP of A",
        "issuer": world.a.idp.issuer,
        "organization": world.a.organization.pk,
        "enabled": "on",
        "jwks_uri": "",
        "jwks": json.dumps(JWKS),
        "algorithms": "ES256",
        "allowed_scopes": "",
        "user_policy": policy,
        "identities-TOTAL_FORMS": "0",
        "identities-INITIAL_FORMS": "0",
    }
    response = ann.post(url, data)
    assert response.status_code == 200 and "user_policy" in response.context["adminform"].form.errors
    world.a.idp.refresh_from_db()
    assert world.a.idp.user_policy == "linked"


def test_an_identity_cannot_link_a_user_outside_the_organizations(ann, world, django_user_model):
    outsider = django_user_model.objects.create_user("outsider", "outsider@example.com", "pw")
    form = ann.get(admin_url(world.a.idp, "change")).context["inline_admin_formsets"][0].formset.forms
    data = {
        "name": "IdP of A",
        "issuer": world.a.idp.issuer,
        "organization": world.a.organization.pk,
        "enabled": "on",
        "jwks_uri": "",
        "jwks": json.dumps(JWKS),
        "algorithms": "ES256",
        "allowed_scopes": "",
        "user_policy": "linked",
        "identities-TOTAL_FORMS": "2",
        "identities-INITIAL_FORMS": "1",
        "identities-0-id": world.a.identity.pk,
        "identities-0-provider": world.a.idp.pk,
        "identities-0-subject": "sub-a",
        "identities-0-user": world.a.member.pk,
        "identities-1-provider": world.a.idp.pk,
        "identities-1-subject": "sub-outsider",
        "identities-1-user": outsider.pk,
    }
    assert len(form) == 1
    response = ann.post(admin_url(world.a.idp, "change"), data)
    assert response.status_code == 200  # the inline's user must be one of the organization's members
    assert not EnterpriseIdentity.objects.filter(user=outsider).exists()
    data["identities-1-user"] = world.a.member.pk
    data["identities-1-subject"] = "sub-a-2"
    assert ann.post(admin_url(world.a.idp, "change"), data).status_code == 302
    assert EnterpriseIdentity.objects.filter(provider=world.a.idp, subject="sub-a-2", user=world.a.member).exists()


# --- NUL bytes (PostgreSQL text holds none) ------------------------------------------------


@pytest.mark.parametrize("query", ["q=%00", "status__exact=%00", "organization__id__exact=%00", "o=%00", "x%00=1"])
@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_a_nul_byte_in_a_list_query_is_djangos_invalid_lookup_redirect_not_a_500(ann, world, screen, query):
    response = ann.get(admin_url(SCREENS[screen]) + "?" + query)
    assert response.status_code in (200, 302), (screen, query, response.status_code)
    if response.status_code == 302:
        assert response["Location"].endswith("?e=1")


@pytest.mark.parametrize("object_id", ["%00", "1%00"])
@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_a_nul_byte_in_an_object_url_is_a_404_not_a_500(ann, world, screen, object_id):
    assert ann.get(admin_url(SCREENS[screen]) + object_id + "/change/").status_code == 404


def test_a_nul_byte_in_an_autocomplete_term_finds_nothing(ann, world):
    response = ann.get(
        "/admin/autocomplete/",
        {
            "app_label": "mcp_oauth",
            "model_name": "organizationmembership",
            "field_name": "organization",
            "term": "\x00",
        },
    )
    assert response.status_code == 200 and response.json()["results"] == []
