"""Per-organization client policy (mcp_oauth.authorization_server.organizations.policy): the order of the
decision, the organization's trust rules on top of the site's, the DCR/CIMD settings, pending rows."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.authorization_server.organizations import policy
from mcp_oauth.models import OrganizationClient, TrustRule
from mcp_oauth.settings import mcp_oauth_settings
from tests.support.organization_helpers import make_organization

pytestmark = pytest.mark.django_db


@pytest.fixture
def acme():
    return make_organization("acme", "Acme Corp")


def decide(organization, application):
    return policy.client_decision(organization, application)


def test_no_policy_is_approved(acme, public_app):
    assert decide(acme, public_app) == policy.ClientDecision("approved", "no_rule")


def test_approval_required_is_pending_until_approved(acme, public_app, user):
    acme.client_approval_required = True
    decision = decide(acme, public_app)
    assert (decision.outcome, decision.reason) == ("pending", "approval_required")
    assert (
        decision.message
        == "An administrator of Acme Corp must approve Test client before members can use it for Acme Corp."
    )
    row, created = policy.request_approval(acme, public_app, user)
    assert created and row.status == "pending" and row.requested_by == user
    assert policy.request_approval(acme, public_app, user) == (row, False)
    assert decide(acme, public_app).outcome == "pending"
    OrganizationClient.objects.filter(pk=row.pk).update(status="approved")
    assert decide(acme, public_app).outcome == "approved"


def test_a_pending_row_without_approval_required_is_approved(acme, public_app, user):
    policy.request_approval(acme, public_app, user)
    assert decide(acme, public_app).outcome == "approved"


def test_denied_by_the_admin_wins_over_no_policy(acme, public_app):
    OrganizationClient.objects.create(organization=acme, application=public_app, status="denied")
    assert (decide(acme, public_app).outcome, decide(acme, public_app).reason) == ("denied", "denied_by_admin")


def test_the_organizations_deny_rule_refuses_even_an_approved_client(acme, public_app):
    OrganizationClient.objects.create(organization=acme, application=public_app, status="approved")
    rule = TrustRule.objects.create(
        target="redirect_host", pattern="client.example.com", action="deny", organization=acme
    )
    decision = decide(acme, public_app)
    assert (decision.outcome, decision.reason, decision.rule_id) == ("refused", "trust_rule", rule.pk)


def test_the_organizations_review_rule_needs_an_admins_approval(acme, public_app):
    rule = TrustRule.objects.create(target="client", pattern=public_app.client_id, action="review", organization=acme)
    decision = decide(acme, public_app)
    assert (decision.outcome, decision.reason, decision.rule_id) == ("pending", "review_rule", rule.pk)
    OrganizationClient.objects.create(organization=acme, application=public_app, status="approved")
    assert decide(acme, public_app).outcome == "approved"


def test_another_organizations_rules_do_not_apply(acme, public_app):
    globex = make_organization("globex")
    TrustRule.objects.create(target="client", pattern=public_app.client_id, action="deny", organization=globex)
    assert decide(acme, public_app).outcome == "approved"
    assert decide(globex, public_app).outcome == "refused"


def test_organization_rules_never_reach_the_site_verdict(acme, public_app, settings):
    """An organization's allow rule cannot let in what the site denies (allowlist mode), and its deny
    rule does not deny the client site-wide."""
    settings.MCP_OAUTH = {**getattr(settings, "MCP_OAUTH", {}), "TRUST_MODE": "allowlist"}
    public_app.registration_source = "dcr"
    public_app.save()
    TrustRule.objects.create(target="client", pattern=public_app.client_id, action="allow", organization=acme)
    assert trust.evaluate_application(public_app).decision == "denied"
    globex = make_organization("globex")
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "open"}
    TrustRule.objects.create(target="redirect_host", pattern="*", action="deny", organization=globex)
    assert trust.evaluate_application(public_app).decision == "unknown"


def test_rule_keys_are_unique_per_organization(acme):
    TrustRule.objects.create(target="client", pattern="x", action="deny")
    TrustRule.objects.create(target="client", pattern="x", action="allow", organization=acme)
    with pytest.raises(IntegrityError), transaction.atomic():
        TrustRule.objects.create(target="client", pattern="x", action="deny", organization=acme)
    with pytest.raises(IntegrityError), transaction.atomic():
        TrustRule.objects.create(target="client", pattern="x", action="review")


@pytest.mark.parametrize(
    ("source", "site_dcr", "site_cimd", "org_dcr", "org_cimd", "allowed"),
    [
        ("dcr", True, True, None, None, True),
        ("dcr", False, True, None, None, False),
        ("dcr", True, True, False, None, False),
        ("dcr", False, True, True, None, False),  # an organization cannot switch on what the site switched off
        ("cimd", True, True, None, False, False),
        ("cimd", True, False, None, None, False),
        ("cimd", True, True, True, True, True),
        ("manual", False, False, False, False, True),
    ],
)
def test_source_allowed(acme, settings, source, site_dcr, site_cimd, org_dcr, org_cimd, allowed):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "DCR_ENABLED": site_dcr, "CIMD_ENABLED": site_cimd}
    oauth2_settings.reload()
    acme.allow_dynamic_registration, acme.allow_client_id_metadata_documents = org_dcr, org_cimd
    assert policy.source_allowed(acme, source) is allowed


def test_the_adapter_is_where_a_site_overrides_the_decision(acme, public_app, settings, rf):
    class Strict(DefaultMCPAdapter):
        def organization_client_decision(self, request, organization, application):
            return policy.ClientDecision("refused", "site_policy", "No.")

    assert DefaultMCPAdapter().organization_client_decision(rf.get("/"), acme, public_app).allowed
    settings.MCP_OAUTH = {**getattr(settings, "MCP_OAUTH", {}), "ADAPTER": Strict}
    assert mcp_oauth_settings.adapter.organization_client_decision(None, acme, public_app).outcome == "refused"
