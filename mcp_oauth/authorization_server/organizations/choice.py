"""Which organization an authorization request acts for.

* A per-organization endpoint (a :class:`~mcp_oauth.models.ProtectedResource` whose
  ``organization`` is set): that organization, no choice; the user must be one of its members.
* A shared endpoint (``organization`` null): the user chooses one of their organizations on the
  consent page (a radio list); a user who belongs to none chooses nothing and the grant acts
  for no organization. A value that is not one of the user's organizations (tampered, or an
  organization the user left since the page was shown) is refused: never a grant.

Memberships are read through the adapter
(:meth:`mcp_oauth.adapter.DefaultMCPAdapter.organization_memberships`), active organizations only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_oauth.models import Organization
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "InvalidOrganizationChoice",
    "chosen_organization",
    "is_member",
    "resource_organization",
    "user_organizations",
]

#: Longest organization value a consent form may carry (a primary key's digits).
MAX_CHOICE_LENGTH = 20


class InvalidOrganizationChoice(ValueError):
    """The consent form's organization is missing, malformed or not one of the user's organizations."""


def user_organizations(user: Any) -> list[Organization]:
    """The active organizations ``user`` belongs to (per the adapter), by name."""
    memberships = mcp_oauth_settings.adapter.organization_memberships(user)
    if not memberships:
        return []
    return list(Organization.objects.active().filter(pk__in=list(memberships)).order_by("name", "slug"))


def is_member(user: Any, organization: Any) -> bool:
    """Whether ``user`` is a member (any role) of the active ``organization`` (per the adapter)."""
    if organization is None or not getattr(organization, "is_active", False):
        return False
    return organization.pk in mcp_oauth_settings.adapter.organization_memberships(user)


def resource_organization(resource: Any) -> Organization | None:
    """The organization whose own endpoint ``resource`` (a ProtectedResource) is, or None (shared)."""
    if resource is None or getattr(resource, "organization_id", None) is None:
        return None
    return Organization.objects.filter(pk=resource.organization_id).first()


def chosen_organization(user: Any, values: Sequence[str]) -> Organization | None:
    """The organization the consent form chose (``values``: the form's ``organization`` values).

    :returns: the organization, or None when the user belongs to none and chose none.
    :raises InvalidOrganizationChoice: the user has organizations and the form names none, more
        than one, or one that is not theirs (or not active); or the user has none and the form names one.
    """
    organizations = user_organizations(user)
    values = [value for value in values if value != ""]
    if not organizations:
        if values:
            raise InvalidOrganizationChoice("You do not belong to that organization.")
        return None
    if len(values) != 1:
        raise InvalidOrganizationChoice("Choose the organization this application will act for.")
    value = values[0]
    if len(value) > MAX_CHOICE_LENGTH or not (value.isascii() and value.isdigit()):
        raise InvalidOrganizationChoice("That is not one of your organizations.")
    for organization in organizations:
        if organization.pk == int(value):
            return organization
    raise InvalidOrganizationChoice("That is not one of your organizations.")
