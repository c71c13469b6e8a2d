"""An organization that denies a client takes back what the client holds for it (issue 31).

An :class:`~mcp_oauth.models.OrganizationClient` saved as ``denied`` (an organization admin's
*Deny*, on a client approved until then or never decided), or an existing row put back to
``pending`` in an organization where that no longer lets the client act (it requires approval, or
a review rule holds the client), revokes, for every user, what the client holds *for that
organization* and nothing else (:func:`withdraw_client`):

* the access and refresh tokens of the client that act for it: chosen for it on a shared endpoint
  (their :class:`~mcp_oauth.models.TokenOrganization`) or bound to its own endpoint (RFC 8707
  audience); refresh tokens are marked revoked (a later use is a reuse, RFC 9700 §4.14.2), access
  tokens deleted one by one (RFC 7009 §2.1) so the token cache drops each entry on every worker;
* the client's consents bound to it: the next authorization meets the organization's decision
  again (the refusal page).

The token endpoint already refuses the client's grants for the organization once it is not
approved (:mod:`.token_binding`); without this, an access token issued before the denial kept
acting for the organization until it expired. One ``grants.revoked`` audit event is written for
each user who held something, with ``organization`` set and ``detail.reason`` =
``"organization_client_denied"`` (or ``"organization_client_unapproved"`` for a row put back to
``pending``). The receiver is connected by :mod:`mcp_oauth.wiring`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_save
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.organizations.policy import client_decision
from mcp_oauth.models import AuditEvent, Consent, OrganizationClient, ProtectedResource, TokenOrganization

__all__ = ["connect", "withdraw_client"]

REASON = "organization_client_denied"
UNAPPROVED = "organization_client_unapproved"


def _acting_for(organization_id: Any) -> tuple[Q, Q]:
    """``(token condition, consent condition)``: what acts for the organization — chosen for it,
    or bound to its own endpoint(s)."""
    chosen = TokenOrganization.objects.filter(organization_id=organization_id).values("token_checksum")
    tokens, consents = Q(token_checksum__in=chosen), Q(organization_id=organization_id)
    for uri in ProtectedResource.objects.filter(organization_id=organization_id).values_list("uri", flat=True):
        tokens |= Q(resource=[uri])
        consents |= Q(resources=[uri])
    return tokens, consents


def withdraw_client(organization: Any, application: Any, *, reason: str = REASON) -> dict[Any, int]:
    """Revoke ``application``'s tokens and consents acting for ``organization`` (see the module);
    ``reason`` goes to each audit event's ``detail.reason``.

    :returns: ``{user primary key: number of tokens revoked}`` for each user who held something.
    """
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    tokens, consents = _acting_for(organization.pk)
    counts: dict[Any, int] = {}
    consent_counts: dict[Any, int] = {}
    with transaction.atomic():
        live_refresh = list(
            RefreshToken.objects.select_for_update().filter(tokens, application=application, revoked__isnull=True)
        )
        access = list(AccessToken.objects.filter(tokens, application=application).values_list("pk", "user_id"))
        for user_id in [token.user_id for token in live_refresh] + [user_id for _, user_id in access]:
            counts[user_id] = counts.get(user_id, 0) + 1
        for refresh_token in live_refresh:
            refresh_token.revoke()  # also deletes its access token
        for access_token in AccessToken.objects.filter(pk__in=[pk for pk, _ in access]):
            access_token.delete()  # one by one: the post_delete receivers tombstone each entry
        live_consents = Consent.objects.filter(consents, application=application, revoked_at__isnull=True)
        for user_id in live_consents.values_list("user_id", flat=True):
            consent_counts[user_id] = consent_counts.get(user_id, 0) + 1
        live_consents.update(revoked_at=timezone.now())
        users = get_user_model().objects.in_bulk(list(counts.keys() | consent_counts.keys()))
        for user_id, user in users.items():
            record(
                AuditEvent.Kind.GRANTS_REVOKED,
                user=user,
                client_id=application.client_id,
                detail={
                    "reason": reason,
                    "user_id": str(user_id),
                    "client_id": application.client_id,
                    "organization": organization.slug,
                    "tokens": counts.get(user_id, 0),
                    "consents": consent_counts.get(user_id, 0),
                },
                organization=organization,
            )
    return counts


def _decision_saved(sender: Any, instance: OrganizationClient, created: bool = False, **kwargs: Any) -> None:
    if instance.status == OrganizationClient.Status.DENIED:
        withdraw_client(instance.organization, instance.application)
    elif instance.status == OrganizationClient.Status.PENDING and not created:
        # Put back to pending: in an organization that requires approval (or holds the client for
        # review) the client may not act any more, so what it holds goes as for a denial. A new
        # pending row (a member's request) holds nothing yet: nothing to read.
        if not client_decision(instance.organization, instance.application).allowed:
            withdraw_client(instance.organization, instance.application, reason=UNAPPROVED)


def connect() -> None:
    """Connect the receiver (idempotent)."""
    post_save.connect(_decision_saved, sender=OrganizationClient, dispatch_uid="mcp_oauth.organization_client_denied")
