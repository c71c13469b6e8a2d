"""Two organizations, A and B, with one row of everything an organization admin manages, for the
admin's organization tests (unit, attack and browser): ``build(resource) -> World``.

A's admin (``ann``, staff with no Django permission) administers A only; ``bea`` administers B;
``max`` is a member of both; the site's superuser is ``root``. Each organization has a client
decision (pending), a consent, a Task, a session, an audit event, a tool call, a trust rule, an
enterprise IdP with a linked identity, an elicitation and its own protected resource; a site-wide
trust rule and the default resource belong to no organization.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import get_application_model

from elicitation.models import Elicitation
from mcp_oauth.models import (
    AuditEvent,
    Consent,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    McpSession,
    McpTask,
    Organization,
    OrganizationClient,
    OrganizationMembership,
    ProtectedResource,
    TokenOrganization,
    ToolCallRecord,
    TrustRule,
)

#: Each screen an organization admin uses, the row of the world it shows, and what they may do there.
SCREENS = {
    "organization": (Organization, {"view", "change"}),
    "membership": (OrganizationMembership, {"view", "add", "change", "delete"}),
    "decision": (OrganizationClient, {"view", "add", "change"}),
    "consent": (Consent, {"view", "change"}),
    "task": (McpTask, {"view", "change"}),
    "session": (McpSession, {"view"}),
    "event": (AuditEvent, {"view"}),
    "call": (ToolCallRecord, {"view"}),
    "rule": (TrustRule, {"view", "add", "change", "delete"}),
    "idp": (EnterpriseIdentityProvider, {"view", "add", "change", "delete"}),
    "identity": (EnterpriseIdentity, {"view", "delete"}),
    "resource": (ProtectedResource, {"view"}),
    "token_row": (TokenOrganization, {"view"}),
    "elicitation": (Elicitation, {"view"}),
}

PASSWORD = "organization admin password"
JWKS = {
    "keys": [
        {
            "kty": "EC",
            "crv": "P-256",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0",
        }
    ]
}


@dataclass
class Side:
    """The rows of one organization."""

    organization: Organization
    admin: Any
    member: Any
    membership: OrganizationMembership
    client: Any
    decision: OrganizationClient
    consent: Consent
    task: McpTask
    session: McpSession
    event: AuditEvent
    call: ToolCallRecord
    rule: TrustRule
    idp: EnterpriseIdentityProvider
    identity: EnterpriseIdentity
    resource: ProtectedResource
    token_row: TokenOrganization
    elicitation: Elicitation

    def rows(self) -> dict[str, Any]:
        """Every row of the organization, by screen."""
        return {
            "organization": self.organization,
            "membership": self.membership,
            "decision": self.decision,
            "consent": self.consent,
            "task": self.task,
            "session": self.session,
            "event": self.event,
            "call": self.call,
            "rule": self.rule,
            "idp": self.idp,
            "identity": self.identity,
            "resource": self.resource,
            "token_row": self.token_row,
            "elicitation": self.elicitation,
        }


@dataclass
class World:
    a: Side
    b: Side
    both: Any
    root: Any
    site_rule: TrustRule
    site_resource: ProtectedResource
    extra: dict[str, Any] = field(default_factory=dict)


def admin_url(obj_or_model: Any, view: str = "changelist", *args: Any) -> str:
    meta = obj_or_model._meta
    if view in ("change", "delete", "history") and not args:
        args = (obj_or_model.pk,)
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def _side(letter: str, site_resource: ProtectedResource, both: Any) -> Side:
    users = get_user_model().objects
    slug = f"org-{letter}"
    organization = Organization.objects.create(slug=slug, name=f"Organization {letter.upper()}")
    admin = users.create_user(f"admin-{letter}", f"admin-{letter}@example.com", PASSWORD, is_staff=True)
    member = users.create_user(f"member-{letter}", f"member-{letter}@example.com", PASSWORD)
    OrganizationMembership.objects.create(organization=organization, user=admin, role="admin")
    membership = OrganizationMembership.objects.create(organization=organization, user=member, role="member")
    OrganizationMembership.objects.create(organization=organization, user=both, role="member")
    client = get_application_model().objects.create(
        name=f"Client of {letter.upper()}",
        client_id=f"client-{letter}",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=f"https://{letter}.example.com/cb",
        registration_source="dcr",
    )
    decision = OrganizationClient.objects.create(organization=organization, application=client, requested_by=member)
    consent = Consent.objects.create(user=member, application=client, scope="mcp", organization=organization)
    # The organization's own endpoint, made with it (ORGANIZATION_ENDPOINTS), under a name of its own.
    resource = ProtectedResource.objects.filter(organization=organization).first() or ProtectedResource(
        uri=f"https://testserver/mcp/o/{slug}", organization=organization
    )
    resource.name = f"MCP of {letter.upper()}"
    resource.save()
    task = McpTask.objects.create(
        tool_name=f"report_{letter}",
        user=member,
        application=client,
        resource=site_resource,
        organization=organization,
        protocol_version="2025-11-25",
    )
    session = McpSession.objects.create(
        id=uuid.uuid4().hex,
        user=member,
        application=client,
        resource=site_resource,
        organization=organization,
        protocol_version="2025-11-25",
    )
    event = AuditEvent.objects.create(
        kind=AuditEvent.Kind.CONSENT_GRANTED, user=member, client_id=client.client_id, organization=organization
    )
    call = ToolCallRecord.objects.create(
        created_at=timezone.now(),
        user=member,
        client_id=client.client_id,
        organization=organization,
        resource=site_resource.uri,
        tool=f"tool_{letter}",
        era="2025",
        protocol_version="2025-11-25",
        outcome="ok",
        duration_ms=1.0,
    )
    rule = TrustRule.objects.create(
        target="client_id_host", pattern=f"*.{letter}.example.com", action="allow", organization=organization
    )
    idp = EnterpriseIdentityProvider.objects.create(
        name=f"IdP of {letter.upper()}",
        issuer=f"https://idp.{letter}.example.com",
        organization=organization,
        jwks=JWKS,
    )
    identity = EnterpriseIdentity.objects.create(provider=idp, subject=f"sub-{letter}", user=member)
    token_row = TokenOrganization.objects.create(
        token_checksum=(letter * 64)[:64], token_kind="access_token", organization=organization
    )
    elicitation = Elicitation.objects.create(
        user=member, message=f"Question for {letter.upper()}", organization=organization, **_elicitation_fields()
    )
    return Side(
        organization,
        admin,
        member,
        membership,
        client,
        decision,
        consent,
        task,
        session,
        event,
        call,
        rule,
        idp,
        identity,
        resource,
        token_row,
        elicitation,
    )


def _elicitation_fields() -> dict[str, Any]:
    return {}


def build(site_resource: ProtectedResource) -> World:
    users = get_user_model().objects
    both = users.create_user("max", "max@example.com", PASSWORD)
    root = users.create_superuser("root", "root@example.com", PASSWORD)
    a = _side("a", site_resource, both)
    b = _side("b", site_resource, both)
    site_rule = TrustRule.objects.create(target="client_id_host", pattern="*.site.example.com", action="deny")
    return World(a=a, b=b, both=both, root=root, site_rule=site_rule, site_resource=site_resource)
