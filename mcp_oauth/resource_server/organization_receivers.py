"""What the token cache keeps about organizations, dropped when it changes (issue 31).

A token's cache entry carries its ``TokenOrganization``'s organization id and its user's
memberships (its client's approvals for a token that speaks for no user):
:mod:`mcp_oauth.resource_server.organizations`. These receivers (connected by
:mod:`mcp_oauth.wiring`) tombstone the entries a change makes stale, on every worker at once
(:mod:`mcp_oauth.resource_server.cache`; the revocation stamp for a cache of each process's own):

* an ``OrganizationMembership`` saved or deleted: every token entry of its user;
* an ``OrganizationClient`` saved or deleted: every token entry of its client;
* a ``TokenOrganization`` changed or deleted: its token's entry (a new row needs nothing: it is
  written before its token, which is never cached unbound).

An ``Organization`` saved or deleted reloads the resource registry, which holds the organizations
(:func:`~mcp_oauth.resource_server.cache.connect_receivers`).
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save

from mcp_oauth.models import OrganizationClient, OrganizationMembership, TokenOrganization
from mcp_oauth.resource_server.cache import forget_application_tokens, forget_token, forget_user_tokens

__all__ = ["connect_receivers"]


def _membership_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    forget_user_tokens(instance.user_id)  # the memberships kept with the user's token entries


def _organization_client_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    forget_application_tokens(instance.application_id)  # the approvals kept with its tokens' entries


def _token_organization_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created:
        forget_token(instance.token_checksum)


def connect_receivers() -> None:
    """Connect the receivers (idempotent)."""
    for signal in (post_save, post_delete):
        uid = "post_save" if signal is post_save else "post_delete"
        signal.connect(
            _membership_changed, sender=OrganizationMembership, dispatch_uid=f"mcp_oauth.org_cache.member.{uid}"
        )
        signal.connect(
            _organization_client_changed, sender=OrganizationClient, dispatch_uid=f"mcp_oauth.org_cache.client.{uid}"
        )
        signal.connect(
            _token_organization_changed, sender=TokenOrganization, dispatch_uid=f"mcp_oauth.org_cache.token.{uid}"
        )
