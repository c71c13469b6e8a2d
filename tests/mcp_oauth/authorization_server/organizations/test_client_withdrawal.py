"""An organization that denies a client it had approved (mcp_oauth.authorization_server.organizations.client_withdrawal):
the client's tokens and consents acting for that organization are revoked at once, for every member;
its connections for other organizations are left working."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.models import AuditEvent, Consent, OrganizationClient
from tests.support.oauth_helpers import token_request
from tests.support.organization_helpers import add_member, checksum, code_for, make_organization
from tests.support.organizations import modern

pytestmark = pytest.mark.django_db


def connect(client, app, organization) -> dict:
    code, verifier = code_for(client, app, organization)
    response = token_request(client, app, code, verifier)
    assert response.status_code == 200, response.content
    return response.json()


def whoami_status(client, token: str) -> tuple[int, str | None]:
    response = modern(client, "/mcp", token, "tools/call", {"name": "whoami", "arguments": {}})
    if response.status_code != 200:
        return response.status_code, None
    return 200, response.json()["result"]["structuredContent"]["organization"]


@pytest.fixture
def world(client, user, resource, public_app):
    acme = make_organization("acme", "Acme Corp", client_approval_required=True)
    globex = make_organization("globex", "Globex")
    add_member(user, acme)
    add_member(user, globex)
    decision = OrganizationClient.objects.create(organization=acme, application=public_app, status="approved")
    client.force_login(user)
    return acme, globex, decision


def test_denying_an_approved_client_revokes_what_it_holds_for_the_organization(client, user, public_app, world):
    acme, globex, decision = world
    for_acme, for_globex = connect(client, public_app, acme), connect(client, public_app, globex)
    assert whoami_status(client, for_acme["access_token"]) == (200, "acme")

    decision.status = OrganizationClient.Status.DENIED
    decision.save()

    assert whoami_status(client, for_acme["access_token"])[0] == 401
    assert not get_access_token_model().objects.filter(token_checksum=checksum(for_acme["access_token"])).exists()
    refresh = get_refresh_token_model().objects.get(token_checksum=checksum(for_acme["refresh_token"]))
    assert refresh.revoked is not None
    assert Consent.objects.get(organization=acme).revoked_at is not None
    # Globex never decided against the client: its connection keeps working.
    assert whoami_status(client, for_globex["access_token"]) == (200, "globex")
    assert Consent.objects.get(organization=globex).revoked_at is None
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).get()
    assert (event.organization_id, event.client_id, event.detail["reason"], event.detail["tokens"]) == (
        acme.pk,
        public_app.client_id,
        "organization_client_denied",
        2,
    )


def test_approving_again_revokes_nothing(client, user, public_app, world):
    acme, _, decision = world
    for_acme = connect(client, public_app, acme)
    decision.save()  # approved again
    assert whoami_status(client, for_acme["access_token"]) == (200, "acme")
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).exists()


def test_putting_an_approved_client_back_to_pending_revokes_it_where_approval_is_required(
    client, user, public_app, world
):
    acme, globex, decision = world
    for_acme, for_globex = connect(client, public_app, acme), connect(client, public_app, globex)
    decision.status = OrganizationClient.Status.PENDING
    decision.save()
    assert whoami_status(client, for_acme["access_token"])[0] == 401
    refresh = get_refresh_token_model().objects.get(token_checksum=checksum(for_acme["refresh_token"]))
    assert refresh.revoked is not None
    assert whoami_status(client, for_globex["access_token"]) == (200, "globex")
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).get()
    assert (event.organization_id, event.detail["reason"], event.detail["tokens"]) == (
        acme.pk,
        "organization_client_unapproved",
        2,
    )


def test_a_pending_row_where_approval_is_not_required_revokes_nothing(client, user, public_app, world):
    _, globex, _ = world
    for_globex = connect(client, public_app, globex)
    row = OrganizationClient.objects.create(organization=globex, application=public_app, status="approved")
    row.status = OrganizationClient.Status.PENDING
    row.save()  # Globex lets every client act: pending changes nothing
    assert whoami_status(client, for_globex["access_token"]) == (200, "globex")
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).exists()
