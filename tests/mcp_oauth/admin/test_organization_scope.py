"""mcp_oauth.admin.organization_scope: an organization admin sees their own organization's rows on every
screen that has an organization, with the permissions the screen gives them; site staff see everything."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import RequestFactory

from mcp_oauth.admin.organization_scope import ClientByIdField, UserByNameField, administered_organizations
from mcp_oauth.models import (
    Consent,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    McpTask,
    Organization,
    OrganizationMembership,
)
from tests.support.organization_admin import SCREENS, admin_url, build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(resource):
    return build(resource)


@pytest.fixture
def ann(client, world):
    """A's organization admin, signed in."""
    client.force_login(world.a.admin)
    return client


def _pks(response):
    return {obj.pk for obj in response.context["cl"].result_list}


def _own(side, screen):
    """The primary keys of one organization's rows on a screen (an organization has three members)."""
    if screen == "membership":
        return set(OrganizationMembership.objects.filter(organization=side.organization).values_list("pk", flat=True))
    return {side.rows()[screen].pk}


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_an_organization_admin_lists_only_their_organizations_rows(ann, world, screen):
    model, _allowed = SCREENS[screen]
    response = ann.get(admin_url(model))
    assert response.status_code == 200
    assert _pks(response) == _own(world.a, screen)


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_a_superuser_lists_every_organizations_rows(client, world, screen):
    model, _allowed = SCREENS[screen]
    client.force_login(world.root)
    response = client.get(admin_url(model))
    assert response.status_code == 200
    assert {world.a.rows()[screen].pk, world.b.rows()[screen].pk} <= _pks(response)


@pytest.mark.parametrize("screen", sorted(SCREENS))
def test_an_organization_admin_has_the_screens_permissions_on_their_rows_only(world, screen):
    from django.contrib import admin

    model, allowed = SCREENS[screen]
    model_admin = admin.site._registry[model]
    request = RequestFactory().get("/admin/")
    request.user = world.a.admin
    own, other = world.a.rows()[screen], world.b.rows()[screen]
    assert model_admin.has_view_permission(request, own) is True
    assert model_admin.has_view_permission(request, other) is False
    assert model_admin.has_change_permission(request, own) is ("change" in allowed)
    assert model_admin.has_delete_permission(request, own) is ("delete" in allowed)
    assert model_admin.has_change_permission(request, other) is False
    assert model_admin.has_delete_permission(request, other) is False
    assert model_admin.has_module_permission(request) is True


def test_the_index_lists_the_organization_admins_screens_and_no_other(ann, world):
    response = ann.get("/admin/")
    assert response.status_code == 200
    names = {model["object_name"] for app in response.context["app_list"] for model in app["models"]}
    assert names == {model.__name__ for model, _ in SCREENS.values()}


def test_a_staff_user_who_administers_nothing_sees_nothing(client, world, django_user_model):
    staff = django_user_model.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
    client.force_login(staff)
    assert client.get(admin_url(Consent)).status_code == 403
    names = [model for app in client.get("/admin/").context["app_list"] for model in app["models"]]
    assert names == []


def test_an_admin_who_is_not_staff_cannot_enter_the_admin(client, world):
    world.a.admin.is_staff = False
    world.a.admin.save()
    client.force_login(world.a.admin)
    response = client.get(admin_url(Consent))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_a_member_of_an_organization_is_no_organization_admin(world):
    request = RequestFactory().get("/")
    world.both.is_staff = True
    request.user = world.both
    assert administered_organizations(request) == frozenset()


def test_an_inactive_organization_is_no_longer_administered(client, world):
    Organization.objects.filter(pk=world.a.organization.pk).update(is_active=False)
    client.force_login(world.a.admin)
    assert client.get(admin_url(Consent)).status_code == 403


def test_staff_with_a_django_permission_on_a_model_keep_its_global_view(client, world):
    world.a.admin.user_permissions.add(Permission.objects.get(codename="view_consent"))
    client.force_login(world.a.admin)
    response = client.get(admin_url(Consent))
    assert _pks(response) == {world.a.consent.pk, world.b.consent.pk}
    # ... and only there: the other screens stay scoped
    assert _pks(client.get(admin_url(McpTask))) == {world.a.task.pk}


def test_the_organization_filter_lists_the_admins_organizations_only(ann, world):
    response = ann.get(admin_url(Consent))
    spec = next(spec for spec in response.context["cl"].filter_specs if spec.parameter_name == "organization")
    assert [title for _value, title in spec.lookup_choices] == ["Organization A"]
    assert b"Organization B" not in response.content


def test_the_organization_filter_narrows_a_superusers_list(client, world):
    client.force_login(world.root)
    response = client.get(admin_url(Consent), {"organization": world.b.organization.pk})
    assert _pks(response) == {world.b.consent.pk}
    for wrong in ("x", "²", "-1", "99999999999999999999", ""):
        response = client.get(admin_url(Consent), {"organization": wrong})
        assert response.status_code == 200 and _pks(response) == set(), wrong


def test_user_by_name_finds_one_active_user_exactly(world):
    field = UserByNameField()
    assert field.clean("member-b") == world.b.member
    assert field.clean("MEMBER-B@example.com") == world.b.member
    assert field.prepare_value(world.b.member.pk) == "member-b"
    for wrong in ("member", "member-", "member-b ", "%", "*"):
        if wrong.strip() == "member-b":
            continue
        with pytest.raises(Exception) as caught:
            field.clean(wrong)
        assert "No user has this exact" in str(caught.value)


def test_client_by_id_finds_one_client_exactly(world):
    field = ClientByIdField()
    assert field.clean("client-b") == world.b.client
    assert field.prepare_value(world.b.client.pk) == "client-b"
    with pytest.raises(Exception) as caught:
        field.clean("client-")
    assert "No client has this exact client ID" in str(caught.value)


def test_an_organization_admin_adds_a_rule_for_their_organization(ann, world):
    from mcp_oauth.models import TrustRule

    data = {
        "organization": world.a.organization.pk,
        "target": "client_id_host",
        "pattern": "tools.vendor.example",
        "registration_source": "",
        "action": "allow",
        "enabled": "on",
        "note": "our vendor",
    }
    assert ann.post(admin_url(TrustRule, "add"), data).status_code == 302
    rule = TrustRule.objects.get(pattern="tools.vendor.example")
    assert (rule.organization, rule.created_by) == (world.a.organization, world.a.admin)


def test_an_organization_admin_adds_an_idp_serving_an_approved_client(ann, world):
    import json

    from tests.support.organization_admin import JWKS

    world.a.decision.status = "approved"
    world.a.decision.save()
    form = ann.get(admin_url(EnterpriseIdentityProvider, "add")).context["adminform"].form
    assert list(form.fields["allowed_clients"].queryset) == [world.a.client]
    # A's own endpoint (made with the organization: ORGANIZATION_ENDPOINTS), nothing of B or the site
    assert list(form.fields["allowed_resources"].queryset) == [world.a.resource]
    data = {
        "name": "Our IdP",
        "issuer": "https://login.a.example.com",
        "organization": world.a.organization.pk,
        "enabled": "on",
        "jwks_uri": "",
        "jwks": json.dumps(JWKS),
        "algorithms": "ES256",
        "allowed_clients": [world.a.client.pk],
        "allowed_resources": [world.a.resource.pk],
        "allowed_scopes": "",
        "user_policy": "linked",
        "identities-TOTAL_FORMS": "0",
        "identities-INITIAL_FORMS": "0",
    }
    response = ann.post(admin_url(EnterpriseIdentityProvider, "add"), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    idp = EnterpriseIdentityProvider.objects.get(issuer="https://login.a.example.com")
    assert idp.organization == world.a.organization
    assert list(idp.allowed_clients.all()) == [world.a.client]


def test_an_organization_admin_deletes_their_idp_with_its_identities(ann, world):
    response = ann.post(admin_url(world.a.idp, "delete"), {"post": "yes"})
    assert response.status_code == 302
    assert not EnterpriseIdentityProvider.objects.filter(pk=world.a.idp.pk).exists()
    assert not EnterpriseIdentity.objects.filter(pk=world.a.identity.pk).exists()
    assert EnterpriseIdentity.objects.filter(pk=world.b.identity.pk).exists()


def test_an_organization_admin_cancels_their_task(ann, world):
    response = ann.post(
        admin_url(McpTask), {"action": "cancel_tasks", "_selected_action": [world.a.task.pk], "index": 0}, follow=True
    )
    assert "1 task(s) cancelled." in [str(m) for m in response.context["messages"]]
    world.a.task.refresh_from_db()
    assert world.a.task.status == McpTask.Status.CANCELLED
