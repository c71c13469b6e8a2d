"""A member removed from an organization keeps nothing of it (issue 31).

:func:`remove_member` takes back what ``user`` holds *for* ``organization``, and nothing else:

* the access and refresh tokens that act for it: chosen for it on a shared endpoint (their
  :class:`~mcp_oauth.models.TokenOrganization`) or bound to its own endpoint (RFC 8707 audience);
  refresh tokens are marked revoked (a later use is a reuse), access tokens deleted (RFC 7009 §2.1),
  their cache entries tombstoned on every worker;
* the consents bound to it (``Consent.organization``, or approved for its endpoint alone): the next
  authorization shows the consent page again;
* its MCP sessions (ended) and Tasks (cancelled, SEP-2663 "Task Cancellation");
* then, once the transaction commits, :data:`mcp_oauth.signals.organization_member_removed` is sent
  (``sender=Organization, organization=…, user=…``): the ``elicitation`` app cancels the user's
  pending elicitations of the organization and removes the third-party connections made for it
  alone.

One ``grants.revoked`` audit event is written, with ``organization`` set and ``detail =
{"reason": "organization_member_removed", "tokens", "consents", "tasks", "sessions"}``.

Receivers (connected by :mod:`mcp_oauth.wiring`): an :class:`~mcp_oauth.models.OrganizationMembership`
deleted calls :func:`remove_member`; an organization deactivated needs nothing here (its tokens are
refused at once: :mod:`mcp_oauth.resource_server.organizations`). A site that maps its own tenant
model through the adapter calls :func:`remove_member` itself when a membership of its own ends;
when it does not, the first token of the user refused for the organization
(:data:`~mcp_oauth.signals.organization_membership_lost`) queues :func:`reconcile_member`, which
asks the adapter again and removes the member when it still does not list the membership.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Q
from django.db.models.signals import post_delete
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.audit import record
from mcp_oauth.mcp_server.mcp_tasks.store import cancel_task
from mcp_oauth.mcp_server.transport.sessions import end_session
from mcp_oauth.models import (
    AuditEvent,
    Consent,
    McpSession,
    McpTask,
    Organization,
    OrganizationMembership,
    ProtectedResource,
    TokenOrganization,
)
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.taskqueue import send_or_run
from mcp_oauth.signals import organization_member_removed, organization_membership_lost

__all__ = ["connect", "reconcile_member", "remove_member"]

REASON = "organization_member_removed"


def _token_filter(organization: Organization) -> Q:
    """The tokens that act for ``organization``: chosen for it, or bound to its endpoint(s)."""
    chosen = TokenOrganization.objects.filter(organization=organization).values("token_checksum")
    condition = Q(token_checksum__in=chosen)
    for uri in ProtectedResource.objects.filter(organization=organization).values_list("uri", flat=True):
        condition |= Q(resource=[uri])
    return condition


def remove_member(organization: Organization, user: Any) -> dict[str, int]:
    """Take back everything ``user`` holds for ``organization`` (see the module docstring).

    :returns: ``{"tokens": n, "consents": n, "tasks": n, "sessions": n}``, what was revoked,
        cancelled or ended.
    """
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    condition = _token_filter(organization)
    uris = list(ProtectedResource.objects.filter(organization=organization).values_list("uri", flat=True))
    with transaction.atomic():
        live_refresh = list(RefreshToken.objects.select_for_update().filter(condition, user=user, revoked__isnull=True))
        access_ids = list(AccessToken.objects.filter(condition, user=user).values_list("pk", flat=True))
        for refresh_token in live_refresh:
            refresh_token.revoke()  # also deletes its access token
        for access_token in AccessToken.objects.filter(pk__in=access_ids):
            access_token.delete()  # one by one: the post_delete receivers tombstone each entry
        consent_filter = Q(organization=organization)
        for uri in uris:
            consent_filter |= Q(resources=[uri])
        consents = Consent.objects.filter(consent_filter, user=user, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        tasks = sum(
            cancel_task(task, reason="The user was removed from the organization.")
            for task in McpTask.objects.filter(user=user, organization=organization).exclude(
                status__in=McpTask.TERMINAL
            )
        )
        sessions = sum(
            end_session(session)
            for session in McpSession.objects.filter(user=user, organization=organization, ended_at__isnull=True)
        )
        counts = {"tokens": len(live_refresh) + len(access_ids), "consents": consents, "tasks": tasks}
        counts["sessions"] = sessions
        record(
            AuditEvent.Kind.GRANTS_REVOKED,
            user=user if getattr(user, "pk", None) else None,
            detail={"reason": REASON, "user_id": str(user.pk), "organization": organization.slug, **counts},
            organization=organization,
        )
        transaction.on_commit(
            lambda: organization_member_removed.send(sender=Organization, organization=organization, user=user)
        )
    return counts


@shared_task(name="mcp_oauth.organizations.reconcile_member", ignore_result=True)
def reconcile_member(organization_pk: int, user_pk: Any) -> bool:
    """Remove ``user_pk`` from ``organization_pk`` (:func:`remove_member`) when the adapter no
    longer lists that membership (asked again here); True when removed."""
    organization = Organization.objects.filter(pk=organization_pk).first()
    user = get_user_model()._default_manager.filter(pk=user_pk).first()
    if organization is None or user is None:
        return False
    if organization.pk in mcp_oauth_settings.adapter.organization_memberships(user):
        return False  # a member again (or the refused entry was stale)
    remove_member(organization, user)
    return True


def _membership_lost(sender: Any, organization: Organization, user: Any, **kwargs: Any) -> None:
    if getattr(user, "pk", None) is None:
        return
    organization_pk, user_pk = organization.pk, user.pk
    transaction.on_commit(lambda: send_or_run(reconcile_member, organization_pk, user_pk))


def _membership_deleted(sender: Any, instance: OrganizationMembership, **kwargs: Any) -> None:
    origin = kwargs.get("origin")
    if not isinstance(origin, OrganizationMembership) and getattr(origin, "model", None) is not OrganizationMembership:
        return  # the organization or the user is being deleted (origin): their rows go with them
    organization = Organization.objects.filter(pk=instance.organization_id).first()
    user = get_user_model()._default_manager.filter(pk=instance.user_id).first()
    if organization is None or user is None:
        return  # the organization or the user is being deleted: their rows go with them
    remove_member(organization, user)


def connect() -> None:
    """Connect the receivers of a deleted membership and of a membership the adapter no longer
    lists (idempotent)."""
    post_delete.connect(
        _membership_deleted,
        sender=OrganizationMembership,
        dispatch_uid="mcp_oauth.authorization_server.user_data.memberships.post_delete",
    )
    organization_membership_lost.connect(
        _membership_lost, dispatch_uid="mcp_oauth.authorization_server.user_data.memberships.lost"
    )
