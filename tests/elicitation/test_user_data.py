"""The elicitation app's part of a member's removal from an organization (issue 31): their pending
elicitations of it end, the connections made for it alone go; nothing of another organization."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from elicitation.models import Elicitation, ThirdPartyConnection
from elicitation.providers import store_connection
from elicitation.service import find_connection
from mcp_oauth.models import AuditEvent, OrganizationMembership
from tests.support.elicitation_keys import make_connection, make_provider
from tests.support.organizations import organization

pytestmark = pytest.mark.django_db


def pending(user, org, mode=Elicitation.Mode.FORM, **fields) -> Elicitation:
    return Elicitation.objects.create(
        mode=mode,
        message="?",
        user=user,
        organization=org,
        expires_at=timezone.now() + timedelta(minutes=5),
        **fields,
    )


def test_a_removed_member_keeps_no_elicitation_nor_connection_of_the_organization(
    key, resource, user, django_capture_on_commit_callbacks
):
    acme, globex = organization("acme", user), organization("globex", user)
    github, gitlab, jira = make_provider("github"), make_provider("gitlab"), make_provider("jira")
    only_acme = make_connection(user, github, organization=acme)
    only_globex = make_connection(user, gitlab, organization=globex)
    shared = make_connection(user, jira)
    form_acme, form_globex = pending(user, acme), pending(user, globex)
    url_acme = pending(user, acme, mode=Elicitation.Mode.URL, kind=Elicitation.Kind.SECRET, secret_name="k")

    with django_capture_on_commit_callbacks(execute=True):
        OrganizationMembership.objects.get(organization=acme, user=user).delete()

    assert set(ThirdPartyConnection.objects.values_list("pk", flat=True)) == {only_globex.pk, shared.pk}
    statuses = dict(Elicitation.objects.values_list("pk", "status"))
    assert statuses == {
        form_acme.pk: Elicitation.Status.EXPIRED,
        url_acme.pk: Elicitation.Status.CANCELLED,
        form_globex.pk: Elicitation.Status.PENDING,
    }
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CONNECTION_REVOKED)
    assert event.detail == {"provider": "github", "reason": "organization_member_removed"}
    assert event.organization_id == acme.pk
    finished = AuditEvent.objects.get(kind=AuditEvent.Kind.ELICITATION_FINISHED)
    assert (finished.organization_id, finished.detail["status"]) == (acme.pk, "cancelled")
    assert only_acme.pk not in ThirdPartyConnection.objects.values_list("pk", flat=True)


def test_a_connection_is_made_for_one_organization_until_another_uses_it(key, user):
    acme, globex = organization("acme", user), organization("globex", user)
    github = make_provider("github")
    payload = {"access_token": "gho_first", "token_type": "bearer", "scope": "read"}
    connection = store_connection(user, github, payload, ["read"], acme.pk)
    assert connection.organization_id == acme.pk
    assert find_connection(user, "github", ["read"], acme.pk)[1].organization_id == acme.pk
    assert find_connection(user, "github", ["read"], globex.pk)[1].organization_id is None
    connection.refresh_from_db()
    assert connection.organization_id is None  # serves two: a removal from either keeps it
    again = store_connection(user, github, {**payload, "access_token": "gho_second"}, ["read"], acme.pk)
    assert again.pk == connection.pk and again.organization_id is None
