"""What revokes a JWT access token (RFC 9068) before its ``exp``: the deny-list writers.

A JWT access token is checked without the database (:mod:`.jwt_tokens`), so the events that end
an opaque token's cache entry must also put a JWT in the deny-list (:func:`.jwt_keys.deny`,
until its ``exp``). These receivers (connected by :func:`connect_receivers` from ``wiring``) do:

==========================================  ==================================================
event                                       tokens denied
==========================================  ==================================================
``AccessToken`` deleted: RFC 7009           that token
revocation, connected-apps revoke
(``revoke_user_grants``), the admin, a
refresh rotation, the deletion of its user
or client (cascades)
user saved with ``is_active`` false         every live token of the user
``OrganizationMembership`` deleted, or      the user's live tokens that act for the
``organization_membership_lost``            organization (``TokenOrganization``)
==========================================  ==================================================

Only the tokens of resources with ``jwt_access_tokens`` on are written. A client saved or deleted,
and a signing key saved or deleted, change the key generation (every process reloads its key ring
and its clients: :func:`.jwt_keys.bump_keys_generation`). An organization made inactive needs no
entry: the organization is checked from the resource registry on every request.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import (
    AccessTokenSigningKey,
    Organization,
    OrganizationMembership,
    ProtectedResource,
    TokenOrganization,
)
from mcp_oauth.resource_server.cache import resource_by_uri
from mcp_oauth.resource_server.jwt_keys import bump_keys_generation, deny
from mcp_oauth.signals import organization_membership_lost

__all__ = ["connect_receivers", "deny_rows"]


def _is_jwt_resource(resource: Any) -> bool:
    bound = list(resource or [])
    if len(bound) != 1:
        return False
    try:
        return resource_by_uri(bound[0]).jwt_access_tokens
    except (ProtectedResource.DoesNotExist, ValueError):
        return False


def deny_rows(rows: Iterable[tuple[str, datetime | None, Any]]) -> int:
    """Deny the live JWT access tokens of ``rows`` (``(token_checksum, expires, resource)``);
    returns how many were written."""
    now = timezone.now()
    entries = [
        (checksum, expires.timestamp())
        for checksum, expires, resource in rows
        if checksum and isinstance(expires, datetime) and expires > now and _is_jwt_resource(resource)
    ]
    deny(entries)
    return len(entries)


def _token_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    deny_rows([(instance.token_checksum, instance.expires, instance.resource)])


def _live_tokens(**filters: Any) -> list[tuple[str, datetime, Any]]:
    return list(
        get_access_token_model()
        .objects.filter(expires__gt=timezone.now(), **filters)
        .values_list("token_checksum", "expires", "resource")
    )


def _user_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created and getattr(instance, "is_active", True) is False:
        deny_rows(_live_tokens(user_id=instance.pk))


def deny_membership(user: Any, organization: Any) -> int:
    """Deny the live tokens of ``user`` that act for ``organization``."""
    if getattr(user, "pk", None) is None or getattr(organization, "pk", None) is None:
        return 0
    checksums = TokenOrganization.objects.filter(
        organization_id=organization.pk, token_kind=TokenOrganization.Kind.ACCESS_TOKEN
    ).values("token_checksum")
    return deny_rows(_live_tokens(user_id=user.pk, token_checksum__in=checksums))


def _membership_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    deny_membership(instance.user, instance.organization)


def _membership_lost(sender: Any, organization: Any = None, user: Any = None, **kwargs: Any) -> None:
    deny_membership(user, organization)


def _keys_changed(sender: Any, **kwargs: Any) -> None:
    bump_keys_generation()


def connect_receivers() -> None:
    """Connect the receivers (called once from ``wiring``)."""
    post_delete.connect(_token_deleted, sender=get_access_token_model(), dispatch_uid="mcp_oauth.jwt.token_deleted")
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="mcp_oauth.jwt.user_saved")
    post_delete.connect(_membership_deleted, sender=OrganizationMembership, dispatch_uid="mcp_oauth.jwt.membership")
    organization_membership_lost.connect(_membership_lost, sender=Organization, dispatch_uid="mcp_oauth.jwt.lost")
    for signal, uid in ((post_save, "post_save"), (post_delete, "post_delete")):
        signal.connect(_keys_changed, sender=AccessTokenSigningKey, dispatch_uid=f"mcp_oauth.jwt.keys.{uid}")
        signal.connect(_keys_changed, sender=get_application_model(), dispatch_uid=f"mcp_oauth.jwt.clients.{uid}")
