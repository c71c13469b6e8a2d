"""mcp_oauth.admin.organizations: the organization's policy (fieldsets; site fields read-only to its
admins; scopes and lifetimes checked against the site's), its members inline, the memberships list."""

from __future__ import annotations

import pytest
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models import Organization, OrganizationMembership
from tests.support.organization_admin import admin_url, build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(resource):
    return build(resource)


@pytest.fixture
def ann(client, world):
    client.force_login(world.a.admin)
    return client


@pytest.fixture
def root(client, world):
    client.force_login(world.root)
    return client


def _policy(**overrides):
    data = {
        "client_approval_required": "on",
        "allow_dynamic_registration": "false",
        "allow_client_id_metadata_documents": "unknown",
        "enabled_tools": "echo\nweather, echo",
        "allowed_scopes": "mcp",
        "access_token_lifetime": "600",
        "refresh_token_lifetime": "",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
    }
    data.update(overrides)
    return data


def test_an_organization_admin_sets_their_organizations_policy(ann, world):
    response = ann.post(admin_url(world.a.organization, "change"), _policy())
    assert response.status_code == 302
    org = Organization.objects.get(pk=world.a.organization.pk)
    assert org.client_approval_required is True
    assert org.allow_dynamic_registration is False
    assert org.allow_client_id_metadata_documents is None
    assert org.enabled_tools == ["echo", "weather"]
    assert org.allowed_scopes == "mcp"
    assert (org.access_token_lifetime, org.refresh_token_lifetime) == (600, None)


def test_the_change_form_groups_the_policy_and_shows_site_fields_read_only(ann, world):
    response = ann.get(admin_url(world.a.organization, "change"))
    assert response.status_code == 200
    names = [fieldset.name for fieldset in response.context["adminform"]]
    assert names == [None, "Clients", "Tools and scopes", "Token lifetimes", "History"]
    form = response.context["adminform"].form
    assert not {"name", "slug", "external_id", "is_active"} & set(form.fields)
    assert b"As the site allows" in response.content


def test_the_add_forms_show_no_history_before_the_row_exists(root, world):
    """They showed "Created: <now>" and "Joined: <now>" on a row not saved yet."""
    response = root.get(admin_url(Organization, "add"))
    assert [fieldset.name for fieldset in response.context["adminform"]] == [
        None,
        "Clients",
        "Tools and scopes",
        "Token lifetimes",
    ]
    assert b"Created:" not in response.content
    response = root.get(admin_url(OrganizationMembership, "add"))
    assert response.status_code == 200
    assert b"Joined:" not in response.content
    shown = root.get(
        admin_url(OrganizationMembership.objects.filter(organization=world.a.organization).first(), "change")
    )
    assert b"Joined:" in shown.content


def test_a_superuser_edits_the_site_fields(root, world):
    data = _policy(name="Renamed", slug="org-a2", external_id="tenant-1", is_active="on")
    assert root.post(admin_url(world.a.organization, "change"), data).status_code == 302
    org = Organization.objects.get(pk=world.a.organization.pk)
    assert (org.name, org.slug, org.external_id) == ("Renamed", "org-a2", "tenant-1")


def test_scopes_the_site_does_not_offer_are_refused(ann, world):
    response = ann.post(admin_url(world.a.organization, "change"), _policy(allowed_scopes="mcp admin:everything"))
    assert response.status_code == 200
    assert "Not a scope this site offers: admin:everything" in str(response.context["adminform"].form.errors)


def test_an_organization_admin_cannot_lengthen_token_lifetimes_past_the_sites(ann, world):
    longer = str(oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS + 1)
    response = ann.post(admin_url(world.a.organization, "change"), _policy(access_token_lifetime=longer))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors["access_token_lifetime"] == [
        f"At most the site's {oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS} seconds."
    ]
    assert Organization.objects.get(pk=world.a.organization.pk).access_token_lifetime is None
    assert ann.post(admin_url(world.a.organization, "change"), _policy(access_token_lifetime="0")).status_code == 200


def test_site_staff_may_set_a_longer_lifetime(client, world):
    client.force_login(world.root)
    longer = oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS + 1
    data = _policy(access_token_lifetime=str(longer), name="Organization A", slug="org-a", is_active="on")
    assert client.post(admin_url(world.a.organization, "change"), data).status_code == 302
    assert Organization.objects.get(pk=world.a.organization.pk).access_token_lifetime == longer


def test_an_organization_admin_cannot_add_or_delete_organizations(ann, world):
    assert ann.get(admin_url(Organization, "add")).status_code == 403
    assert ann.get(admin_url(world.a.organization, "delete")).status_code == 403


def test_an_organization_admin_adds_a_member_by_exact_username_or_email(ann, world, django_user_model):
    newcomer = django_user_model.objects.create_user("newcomer", "new@example.com", "pw")
    add = admin_url(OrganizationMembership, "add")
    response = ann.post(add, {"organization": world.a.organization.pk, "user": "new@example.com", "role": "member"})
    assert response.status_code == 302
    assert OrganizationMembership.objects.get(user=newcomer).organization == world.a.organization
    response = ann.post(add, {"organization": world.a.organization.pk, "user": "newcome", "role": "member"})
    assert response.status_code == 200
    assert "No user has this exact username or e-mail address." in str(response.context["adminform"].form.errors)


def test_the_add_form_offers_no_list_of_the_sites_users(ann, world):
    response = ann.get(admin_url(OrganizationMembership, "add"))
    assert b"member-b" not in response.content and b"admin-b" not in response.content
    assert b'name="user"' in response.content and b'type="text"' in response.content


def test_making_an_admin_who_is_not_staff_warns(ann, world):
    response = ann.post(
        admin_url(OrganizationMembership, "add"),
        {"organization": world.a.organization.pk, "user": "member-b", "role": "admin"},
        follow=True,
    )
    messages = [str(m) for m in response.context["messages"]]
    assert any("member-b is an admin of Organization A, but not staff" in m for m in messages)


def test_an_organization_admin_removes_a_member(ann, world):
    membership = world.a.membership
    response = ann.post(admin_url(membership, "delete"), {"post": "yes"})
    assert response.status_code == 302
    assert not OrganizationMembership.objects.filter(pk=membership.pk).exists()


def test_the_inline_refuses_to_change_the_admins_own_row(ann, world):
    own = OrganizationMembership.objects.get(user=world.a.admin)
    data = _policy(
        **{
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-0-id": own.pk,
            "memberships-0-organization": world.a.organization.pk,
            "memberships-0-user": "admin-a",
            "memberships-0-role": "member",
        }
    )
    response = ann.post(admin_url(world.a.organization, "change"), data)
    assert response.status_code == 200
    assert "You cannot change or remove your own membership." in response.content.decode()
    own.refresh_from_db()
    assert own.role == "admin"


def test_the_inline_changes_a_members_role(ann, world):
    membership = world.a.membership
    data = _policy(
        **{
            "memberships-TOTAL_FORMS": "1",
            "memberships-INITIAL_FORMS": "1",
            "memberships-0-id": membership.pk,
            "memberships-0-organization": world.a.organization.pk,
            "memberships-0-user": "member-a",
            "memberships-0-role": "admin",
        }
    )
    assert ann.post(admin_url(world.a.organization, "change"), data).status_code == 302
    membership.refresh_from_db()
    assert membership.role == "admin"
