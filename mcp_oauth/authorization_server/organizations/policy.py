"""Per-organization client policy: may this client act for this organization's members?

The site-wide trust policy (:mod:`mcp_oauth.authorization_server.client_registry.trust`) is
applied first, everywhere (authorization page, every grant at the token endpoint); what an
organization decides comes on top of it, for that organization's requests only, and can only
refuse more: a client the site denies or holds for review is refused for every organization,
whatever the organization's rules say.

:func:`client_decision` (the default of
:meth:`mcp_oauth.adapter.DefaultMCPAdapter.organization_client_decision`) decides, first match wins:

1. the client registered dynamically (RFC 7591) and the organization's
   ``allow_dynamic_registration`` is false, or by a Client ID Metadata Document and
   ``allow_client_id_metadata_documents`` is false → ``refused``. Null inherits the site's
   (``OAUTH2_PROVIDER["DCR_ENABLED"]`` / ``["CIMD_ENABLED"]``); true cannot switch on what the site
   switched off;
2. an enabled trust rule of the organization (a :class:`~mcp_oauth.models.TrustRule` whose
   ``organization`` is set) denies it → ``refused``; one holds it for review
   → the client needs an organization admin's approval, as in 4;
3. the organization's :class:`~mcp_oauth.models.OrganizationClient` row says ``denied`` →
   ``denied``; ``approved`` → ``approved``;
4. the organization requires approval (``client_approval_required``) or a rule of 2. holds
   the client for review, and no admin approved it → ``pending``;
5. otherwise → ``approved``.

What follows from each outcome: ``approved`` — the consent page, then a code and tokens;
``pending`` — the member sees a page saying an admin of the organization must approve the
client, and a pending row is recorded (:func:`request_approval`); ``denied`` / ``refused`` — a
page saying the client was refused; at the token endpoint anything but ``approved`` is
``invalid_grant`` (RFC 6749 §5.2): the grant no longer holds for that organization.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.models import AuditEvent, OrganizationClient, TrustRule

__all__ = [
    "APPROVED",
    "DENIED",
    "PENDING",
    "REFUSED",
    "ClientDecision",
    "client_decision",
    "organization_rules",
    "organization_verdict",
    "record_decision",
    "request_approval",
    "source_allowed",
]

#: Outcomes of :func:`client_decision`.
APPROVED = "approved"
PENDING = "pending"
DENIED = "denied"
REFUSED = "refused"


@dataclass(frozen=True)
class ClientDecision:
    """An organization's decision on a client.

    :ivar outcome: ``approved``, ``pending``, ``denied`` or ``refused``.
    :ivar reason: why, for administrators and the audit log (``approval_required``, ``review_rule``,
        ``denied_by_admin``, ``trust_rule``, ``dynamic_registration``, ``client_id_metadata_document``,
        ``approved``, ``no_rule``).
    :ivar message: what the member (or the client, at the token endpoint) is told; ASCII.
    :ivar rule_id: the primary key of the deciding organization :class:`~mcp_oauth.models.TrustRule`, or None.
    """

    outcome: str
    reason: str
    message: str = ""
    rule_id: int | None = None

    @property
    def allowed(self) -> bool:
        """Whether the client may act for the organization's members (``approved``)."""
        return self.outcome == APPROVED


def source_allowed(organization: Any, registration_source: str | None) -> bool:
    """Whether clients registered by ``registration_source`` (``dcr``, ``cimd``, ``manual``) may act for
    ``organization``: its ``allow_dynamic_registration`` / ``allow_client_id_metadata_documents``,
    null inheriting the site's ``DCR_ENABLED`` / ``CIMD_ENABLED``; an administrator's (manual) client always."""
    if registration_source == trust.DCR:
        flag, site = organization.allow_dynamic_registration, bool(oauth2_settings.DCR_ENABLED)
    elif registration_source == trust.CIMD:
        flag, site = organization.allow_client_id_metadata_documents, bool(oauth2_settings.CIMD_ENABLED)
    else:
        return True
    return site if flag is None else (flag and site)


def organization_rules(organization: Any) -> list[TrustRule]:
    """The enabled trust rules of ``organization`` (one query)."""
    return list(TrustRule.objects.filter(enabled=True, organization=organization))


def organization_verdict(organization: Any, application: Any, rules: list[TrustRule] | None = None):
    """The verdict of ``organization``'s own trust rules on ``application`` (a
    :class:`~mcp_oauth.authorization_server.client_registry.trust.Verdict`), or None when none of them
    speaks about it (the site's verdict stands)."""
    rules = organization_rules(organization) if rules is None else rules
    if not rules:
        return None
    verdict = trust.evaluate(
        client_id=application.client_id,
        redirect_uris=(application.redirect_uris or "").split(),
        registration_source=application.registration_source,
        rules=rules,
        mode=trust.MODE_OPEN,
    )
    return verdict if verdict.rule_id is not None else None


def _name(application: Any) -> str:
    return str(application.name or application.client_id)


def client_decision(organization: Any, application: Any, *, rules: list[TrustRule] | None = None) -> ClientDecision:
    """Decide whether ``application`` (a DOT ``Application``) may act for ``organization``'s
    members (see the module docstring for the order). Reads the organization's rules (unless
    ``rules`` is given) and its :class:`~mcp_oauth.models.OrganizationClient` row: two queries.
    Writes nothing."""
    org, client = str(organization), _name(application)
    source = getattr(application, "registration_source", "") or ""
    if not source_allowed(organization, source):
        kind = "dynamic_registration" if source == trust.DCR else "client_id_metadata_document"
        how = "registered themselves dynamically" if source == trust.DCR else "are identified by a metadata document"
        return ClientDecision(
            REFUSED, kind, f"{org} does not accept applications that {how}: {client} cannot be used for {org}."
        )
    verdict = organization_verdict(organization, application, rules)
    if verdict is not None and verdict.decision == trust.DENIED:
        return ClientDecision(
            REFUSED, "trust_rule", f"{org}'s policy does not allow {client}.", rule_id=verdict.rule_id
        )
    held = verdict is not None and verdict.decision == trust.REVIEW
    status = (
        OrganizationClient.objects.filter(organization=organization, application=application)
        .values_list("status", flat=True)
        .first()
    )
    if status == OrganizationClient.Status.DENIED:
        return ClientDecision(DENIED, "denied_by_admin", f"An administrator of {org} has refused {client} for {org}.")
    if status == OrganizationClient.Status.APPROVED:
        return ClientDecision(APPROVED, "approved")
    if organization.client_approval_required or held:
        return ClientDecision(
            PENDING,
            "review_rule" if held else "approval_required",
            f"An administrator of {org} must approve {client} before members can use it for {org}.",
            rule_id=verdict.rule_id if held and verdict is not None else None,
        )
    return ClientDecision(APPROVED, "no_rule")


def request_approval(organization: Any, application: Any, user: Any) -> tuple[OrganizationClient, bool]:
    """The organization's pending :class:`~mcp_oauth.models.OrganizationClient` row for
    ``application``, created (``requested_by`` = ``user``) when there is none.

    :returns: ``(row, created)``. A row an admin decided on is returned as it is.
    """
    try:
        with transaction.atomic():
            return OrganizationClient.objects.get_or_create(
                organization=organization,
                application=application,
                defaults={"status": OrganizationClient.Status.PENDING, "requested_by": user},
            )
    except IntegrityError:  # a concurrent request created it
        return OrganizationClient.objects.get(organization=organization, application=application), False


def record_decision(
    decision: ClientDecision, *, request: Any, organization: Any, application: Any, stage: str, requested: bool = False
) -> None:
    """Audit a decision that was not ``approved``: ``organization.client_requested`` when it is
    ``pending`` (``detail.new_request``: whether this request created the pending row),
    ``organization.client_refused`` otherwise; ``detail.reason``, ``detail.stage`` (``authorization``
    or ``token``); ``AuditEvent.organization`` is set."""
    if decision.allowed:
        return
    pending = decision.outcome == PENDING
    kind = AuditEvent.Kind.ORGANIZATION_CLIENT_REQUESTED if pending else AuditEvent.Kind.ORGANIZATION_CLIENT_REFUSED
    record(
        kind,
        request=request,
        client_id=application.client_id,
        organization=organization,
        detail={
            "stage": stage,
            "outcome": decision.outcome,
            "reason": decision.reason,
            "rule": decision.rule_id,
            "organization": organization.slug,
            **({"new_request": requested} if pending else {}),
        },
    )
