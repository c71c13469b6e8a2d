"""mcp_oauth.admin.organization_clients: approving and denying clients for an organization (who and
when recorded, an audit event written), adding a decision by exact client ID, token organizations
read-only."""

from __future__ import annotations

import pytest

from mcp_oauth.models import AuditEvent, OrganizationClient, TokenOrganization
from tests.support.organization_admin import admin_url, build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(resource):
    return build(resource)


@pytest.fixture
def ann(client, world):
    client.force_login(world.a.admin)
    return client


def _act(client, action, rows):
    return client.post(
        admin_url(OrganizationClient),
        {"action": action, "_selected_action": [str(r.pk) for r in rows], "index": 0},
        follow=True,
    )


@pytest.mark.parametrize(
    ("action", "status", "kind"),
    [("approve", "approved", "organization.client_approved"), ("deny", "denied", "organization.client_denied")],
)
def test_a_decision_records_who_when_and_an_audit_event(ann, world, action, status, kind):
    response = _act(ann, action, [world.a.decision])
    verb = {"approve": "Approved", "deny": "Denied"}[action]
    assert f"{verb} 1 client." in [str(m) for m in response.context["messages"]]
    row = OrganizationClient.objects.get(pk=world.a.decision.pk)
    assert (row.status, row.decided_by) == (status, world.a.admin)
    assert row.decided_at is not None
    event = AuditEvent.objects.get(kind=kind)
    assert (event.user, event.client_id, event.organization_id) == (world.a.admin, "client-a", world.a.organization.pk)
    assert event.detail == {"via": "admin", "organization": "org-a", "previous": "pending"}


def test_deciding_again_the_same_way_changes_nothing(ann, world):
    _act(ann, "approve", [world.a.decision])
    first = OrganizationClient.objects.get(pk=world.a.decision.pk).decided_at
    response = _act(ann, "approve", [world.a.decision])
    assert "Approved 0 clients." in [str(m) for m in response.context["messages"]]
    assert OrganizationClient.objects.get(pk=world.a.decision.pk).decided_at == first
    assert AuditEvent.objects.filter(kind="organization.client_approved").count() == 1


def test_an_organization_admin_adds_an_approval_by_exact_client_id(ann, world):
    response = ann.post(
        admin_url(OrganizationClient, "add"),
        {"organization": world.a.organization.pk, "application": "client-b", "status": "approved"},
    )
    assert response.status_code == 302
    row = OrganizationClient.objects.get(organization=world.a.organization, application=world.b.client)
    assert (row.status, row.requested_by, row.decided_by) == ("approved", world.a.admin, world.a.admin)
    assert AuditEvent.objects.filter(kind="organization.client_approved", client_id="client-b").count() == 1
    response = ann.post(
        admin_url(OrganizationClient, "add"),
        {"organization": world.a.organization.pk, "application": "client-", "status": "approved"},
    )
    assert "No client has this exact client ID." in str(response.context["adminform"].form.errors)


def test_the_change_form_decides_and_keeps_organization_and_client(ann, world):
    url = admin_url(world.a.decision, "change")
    response = ann.post(url, {"status": "denied", "organization": world.b.organization.pk})
    assert response.status_code == 302
    row = OrganizationClient.objects.get(pk=world.a.decision.pk)
    assert (row.status, row.decided_by, row.organization_id) == ("denied", world.a.admin, world.a.organization.pk)
    assert AuditEvent.objects.filter(kind="organization.client_denied").count() == 1
    ann.post(url, {"status": "pending"})
    row.refresh_from_db()
    assert (row.status, row.decided_by, row.decided_at) == ("pending", None, None)


def test_an_organization_admin_cannot_delete_a_decision(ann, world):
    assert ann.get(admin_url(world.a.decision, "delete")).status_code == 403


def test_token_organizations_are_read_only(ann, client, world):
    for who in (ann,):
        assert who.get(admin_url(TokenOrganization, "add")).status_code == 403
        response = who.post(admin_url(world.a.token_row, "change"), {"token_kind": "refresh_token"})
        assert response.status_code == 403
    assert TokenOrganization.objects.get(pk=world.a.token_row.pk).token_kind == "access_token"


def test_a_superuser_sees_and_decides_every_organizations_clients(client, world):
    client.force_login(world.root)
    response = _act(client, "approve", [world.a.decision, world.b.decision])
    assert "Approved 2 clients." in [str(m) for m in response.context["messages"]]
    assert set(OrganizationClient.objects.values_list("status", flat=True)) == {"approved"}
