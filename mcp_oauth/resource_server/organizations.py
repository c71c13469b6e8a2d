"""The organization a token acts for (issue 31), known on the hot path without a query.

A request acts for one organization, or for none:

* at a **per-organization endpoint** (a :class:`~mcp_oauth.models.ProtectedResource` whose
  ``organization`` is set; tokens are bound to it by audience, RFC 8707): that organization,
  loaded with the resource registry (:mod:`mcp_oauth.resource_server.cache`);
* at a **shared endpoint**: the organization of the token's
  :class:`~mcp_oauth.models.TokenOrganization` row (the one the user chose on the consent page),
  whose id is loaded with the token row in the same query (:func:`organization_subquery`) and kept
  in the token-cache entry as :data:`ORGANIZATION_ATTRIBUTE`; the organization itself comes from the
  registry;
* else none.

The token stands for an organization only while the organization is active and (for a token that
speaks for a user) the user is a member of it *per the adapter* (for a token that speaks for no
user, ``client_credentials``: while the organization has approved the client,
:class:`~mcp_oauth.models.OrganizationClient`)
(:meth:`~mcp_oauth.adapter.DefaultMCPAdapter.organization_memberships`): the user's memberships are
read when the token row is loaded (a cache miss) and kept in the entry as
:data:`MEMBERSHIPS_ATTRIBUTE`. Invalidation (receivers of :mod:`~mcp_oauth.resource_server.cache`,
through the tombstones and the revocation stamp every worker honours): a membership saved or
deleted tombstones the user's token entries; an organization saved or deleted changes the
resource generation (the registry, with ``is_active`` and ``enabled_tools``, is reloaded on every
worker); a ``TokenOrganization`` row saved or deleted tombstones its token's entry. A site that maps
its own tenant model through the adapter calls :func:`~mcp_oauth.resource_server.cache.forget_user_tokens`
when a membership of its own ends (else the entry is read again within ``TOKEN_CACHE_SECONDS``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db.models import OuterRef, Subquery

from mcp_oauth.models import Organization, OrganizationClient, ProtectedResource, TokenOrganization
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "MEMBERSHIPS_ATTRIBUTE",
    "ORGANIZATION_ATTRIBUTE",
    "NotLoaded",
    "OrganizationRefused",
    "enabled_tool_names",
    "memberships_of",
    "organization_subquery",
    "token_organization",
]

#: The attribute of a loaded ``AccessToken`` that holds its ``TokenOrganization``'s organization
#: id (None: the token was not bound to an organization on a shared endpoint).
ORGANIZATION_ATTRIBUTE = "mcp_organization_id"
#: The attribute of a loaded ``AccessToken`` that holds its user's organizations per the adapter,
#: read when the row was loaded (a ``frozenset`` of primary keys; absent: not read). For a token
#: that speaks for no user (``client_credentials``): the organizations that approved its client.
MEMBERSHIPS_ATTRIBUTE = "_mcp_organization_memberships"


class NotLoaded(Exception):
    """What the organization check needs is not in memory (an organization the registry has not
    loaded, memberships not read): the event-loop path gives way to the thread path."""


class OrganizationRefused(Exception):
    """The token's organization is inactive or gone, the user is not one of its members, or the
    token was chosen for another organization than the endpoint's: 401 ``invalid_token``.

    ``not_member`` is the organization (active) whose member the token's user is not (per the
    adapter), else None."""

    def __init__(self, reason: str, not_member: Organization | None = None) -> None:
        super().__init__(reason)
        self.not_member = not_member


def organization_subquery() -> Subquery:
    """The organization id of an ``AccessToken``'s ``TokenOrganization`` row (annotate
    :data:`ORGANIZATION_ATTRIBUTE` with it: one query loads both)."""
    rows = TokenOrganization.objects.filter(token_checksum=OuterRef("token_checksum"))
    return Subquery(rows.values("organization_id")[:1])


def memberships_of(user: Any) -> frozenset[Any]:
    """The primary keys of the active organizations ``user`` belongs to, per the adapter (the
    default adapter: one query)."""
    return frozenset(mcp_oauth_settings.adapter.organization_memberships(user))


def approvals_of(application: Any) -> frozenset[Any]:
    """The primary keys of the organizations that approved the client ``application`` (one
    query): where a token that speaks for no user, only for the client, may act."""
    if getattr(application, "pk", None) is None:
        return frozenset()
    rows = OrganizationClient.objects.filter(application_id=application.pk, status=OrganizationClient.Status.APPROVED)
    return frozenset(rows.values_list("organization_id", flat=True))


def needs_memberships(token: Any, resource: ProtectedResource | None) -> bool:
    """Whether the organization check of ``token`` will need :data:`MEMBERSHIPS_ATTRIBUTE`: it
    acts for an organization (its ``TokenOrganization``, or ``resource``: the resource it is bound
    to, when known)."""
    return token.__dict__.get(ORGANIZATION_ATTRIBUTE) is not None or (
        resource is not None and resource.organization_id is not None
    )


def load_memberships(token: Any) -> frozenset[Any]:
    """:data:`MEMBERSHIPS_ATTRIBUTE` of ``token``: its user's memberships, or (no user) its
    client's approvals."""
    if getattr(token, "user_id", None) is None:
        return approvals_of(token.application)
    return memberships_of(token.user)


def token_organization(
    resource: ProtectedResource,
    token: Any,
    user: Any,
    organization_by_pk: Callable[[Any], Organization | None],
    *,
    may_query: bool,
) -> Organization | None:
    """The organization ``token`` acts for at ``resource`` (see the module's docstring).

    :param organization_by_pk: the registry's lookup (None: no such organization).
    :param may_query: False on the event loop: raise :class:`NotLoaded` rather than read the
        memberships through the adapter.
    :raises OrganizationRefused: inactive or unknown organization, a user who is not a member, a
        token chosen for another organization than the endpoint's.
    :raises NotLoaded: see ``may_query``; or ``organization_by_pk`` raised it.
    """
    chosen = token.__dict__.get(ORGANIZATION_ATTRIBUTE)
    organization: Organization | None
    if resource.organization_id is not None:
        if chosen is not None and chosen != resource.organization_id:
            raise OrganizationRefused("chosen for another organization than the endpoint's")
        organization = resource.organization
        if organization is None:
            raise OrganizationRefused("the endpoint's organization is gone")
    elif chosen is not None:
        organization = organization_by_pk(chosen)
        if organization is None:
            raise OrganizationRefused("the token's organization is gone")
    else:
        return None
    if not organization.is_active:
        raise OrganizationRefused("the organization is inactive")
    memberships = token.__dict__.get(MEMBERSHIPS_ATTRIBUTE)
    if memberships is None:
        if not may_query:
            raise NotLoaded("memberships")
        memberships = memberships_of(user) if user is not None else approvals_of(token.application)
    if organization.pk not in memberships:
        if user is None:  # a client's own token: only for an organization that approved the client
            raise OrganizationRefused("the organization has not approved the client")
        raise OrganizationRefused("the user is not a member of the organization", not_member=organization)
    return organization


def enabled_tool_names(organization: Organization | None) -> frozenset[str] | None:
    """The names of the tools ``organization`` enabled, or None when every tool is (no
    organization, or an empty ``enabled_tools``). Read from the registry's row: no query."""
    if organization is None:
        return None
    names = organization.enabled_tools
    if not names or not isinstance(names, list):
        return None
    return frozenset(name for name in names if isinstance(name, str))
