"""The organization of a grant at the token endpoint, and its policy on the tokens.

The organization an authorization acts for (:mod:`.choice`) travels with the authorization code as
a :class:`~mcp_oauth.models.TokenOrganization` row of kind ``code`` (:func:`remember_code_organization`,
written before the grant row), and from there to the tokens: :func:`bind_organization` (the request
validator, before any token row is written, like the DPoP bindings of
:mod:`mcp_oauth.dpop.bindings`) decides the grant's organization:

* ``authorization_code``: the code's row; the resource's organization for a per-organization endpoint;
* ``refresh_token``: the presented refresh token's row (inherited by the new pair);
* jwt-bearer (ID-JAG): the enterprise identity provider's organization, else the resource's;
* token exchange (RFC 8693): the subject token's (its row, else its resource's organization);
* ``client_credentials``: none (no user acts).

Then, for a grant that acts for an organization (``invalid_grant`` for each refusal, RFC 6749 §5.2):
the organization is active and the user is still one of its members (the adapter); a resource of
another organization's endpoint is refused; the adapter's
:meth:`~mcp_oauth.adapter.DefaultMCPAdapter.organization_client_decision` is ``approved`` (a client
whose approval became required since the code was issued is refused); a refresh token past the
organization's refresh lifetime is refused. The token's scopes are narrowed to the organization's
``allowed_scopes`` (none left: ``invalid_scope``), its ``expires_in`` is at most the organization's
``access_token_lifetime`` (:mod:`mcp_oauth.authorization_server.tokens.lifetimes`), a refresh token older than its ``refresh_token_lifetime`` is refused,
and a ``TokenOrganization`` row is written for the access token and the refresh token (pruned
when the token has expired by the site's lifetime, never earlier: a refresh token without its row
would act for no organization).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.models import refresh_token_expire_timedelta
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.authorization_server.organizations import policy
from mcp_oauth.authorization_server.organizations.choice import is_member
from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.models import Organization, TokenOrganization
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["bind_organization", "bound_organization_id", "prune_token_organizations", "remember_code_organization"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"


def _checksum(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def remember_code_organization(code: str, organization_id: int) -> None:
    """Record that the authorization code ``code`` acts for organization ``organization_id``
    (a ``code`` row, expiring with the code)."""
    TokenOrganization.objects.create(
        token_checksum=_checksum(code),
        token_kind=TokenOrganization.Kind.AUTHORIZATION_CODE,
        organization_id=organization_id,
        expires=timezone.now() + timedelta(seconds=oauth2_settings.AUTHORIZATION_CODE_EXPIRE_SECONDS),
    )


def _row(value: str | None, kind: str) -> TokenOrganization | None:
    if not value:
        return None
    return TokenOrganization.objects.filter(token_checksum=_checksum(value), token_kind=kind).first()


def _refuse(request: Any, description: str) -> errors.OAuth2Error:
    return errors.InvalidGrantError(description=description, request=request)


def _resource_organization_id(resources: list[str]) -> int | None:
    for uri in resources:
        try:
            organization_id = select_resource([uri]).organization_id
        except InvalidTarget:
            continue
        if organization_id is not None:
            return organization_id
    return None


_UNREAD = object()


def bound_organization_id(request: Any) -> int | None:
    """The organization the grant's code, refresh token or identity provider binds it to (read once
    per request: the token's lifetime asks before :func:`bind_organization`)."""
    memo = getattr(request, "_mcp_bound_organization_id", _UNREAD)
    if memo is not _UNREAD:
        return memo  # type: ignore[return-value]  # an int or None, set below
    organization_id = _bound_organization_id(request)
    request._mcp_bound_organization_id = organization_id
    return organization_id


def _bound_organization_id(request: Any) -> int | None:
    if request.grant_type == "authorization_code":
        row = _row(getattr(request, "code", None), TokenOrganization.Kind.AUTHORIZATION_CODE)
    elif request.grant_type == "refresh_token":
        row = _row(getattr(request, "refresh_token", None), TokenOrganization.Kind.REFRESH_TOKEN)
        request._mcp_refresh_bound_at = row.created_at if row is not None else None
    elif request.grant_type == JWT_BEARER:
        return getattr(request, "_mcp_idp_organization_id", None)
    elif request.grant_type == TOKEN_EXCHANGE:
        return getattr(request, "_mcp_subject_organization_id", None)
    else:
        return None
    return row.organization_id if row is not None else None


def _check_refresh_lifetime(request: Any, organization: Organization, now: datetime) -> None:
    """A refresh token lives ``refresh_token_lifetime`` seconds from its issue (each rotation issues a
    new one, as the site's lifetime runs from the newest pair: RFC 6749 §6)."""
    issued = getattr(request, "_mcp_refresh_bound_at", None)
    lifetime = organization.refresh_token_lifetime
    if request.grant_type == "refresh_token" and issued is not None and lifetime:
        if issued + timedelta(seconds=lifetime) <= now:
            raise _refuse(request, f"The refresh token has expired ({organization}'s refresh token lifetime).")


def _narrowed_scopes(token: dict[str, Any], request: Any, organization: Organization) -> None:
    allowed = organization.allowed_scope_list
    if not allowed:
        return
    scopes = [scope for scope in str(token.get("scope", "")).split() if scope in allowed]
    if not scopes:
        raise errors.InvalidScopeError(
            description=f"None of the requested scopes is allowed by {organization}.", request=request
        )
    token["scope"] = " ".join(scopes)
    request.scopes = scopes


def _refresh_expiry(access_expires: datetime) -> datetime | None:
    """When the row of a refresh token may go: when the site's lifetime ends it (DOT refuses it then
    too). Never earlier: a refresh token without its row would act for no organization."""
    delta = refresh_token_expire_timedelta()
    return access_expires + delta if delta else None


def bind_organization(token: dict[str, Any], request: Any, resources: Callable[[], list[str]]) -> Organization | None:
    """Decide the organization of the grant being saved (see the module docstring), apply its
    scopes and lifetimes to ``token`` (oauthlib's token response, values drawn, rows not saved yet)
    and write its ``TokenOrganization`` rows.

    :param resources: the canonical resource URIs the tokens will be bound to (RFC 8707).
    :returns: the organization, or None (the grant acts for none).
    :raises oauthlib.oauth2.rfc6749.errors.OAuth2Error: ``invalid_grant``, ``invalid_scope``.
    """
    if request.grant_type == "client_credentials":
        return None
    now = timezone.now()
    bound_id = bound_organization_id(request)
    resource_id = _resource_organization_id(resources())
    if bound_id is not None and resource_id is not None and bound_id != resource_id:
        raise _refuse(request, "This grant acts for another organization than the requested resource's.")
    organization_id = resource_id if resource_id is not None else bound_id
    if organization_id is None:
        return None
    organization = Organization.objects.filter(pk=organization_id).first()
    user = getattr(request, "user", None)
    if organization is None or not is_member(user, organization):
        raise _refuse(request, "The user is not a member of the organization this grant acts for.")
    decision = mcp_oauth_settings.adapter.organization_client_decision(request, organization, request.client)
    if not decision.allowed:
        policy.record_decision(
            decision, request=request, organization=organization, application=request.client, stage="token"
        )
        raise _refuse(request, decision.message or f"This client may not act for {organization}.")
    _check_refresh_lifetime(request, organization, now)
    _narrowed_scopes(token, request, organization)
    # The organization's access_token_lifetime is in token["expires_in"] already (tokens.lifetimes).
    access_expires = now + timedelta(seconds=token["expires_in"])
    rows = [
        TokenOrganization(
            token_checksum=_checksum(token["access_token"]),
            token_kind=TokenOrganization.Kind.ACCESS_TOKEN,
            organization_id=organization.pk,
            expires=access_expires,
        )
    ]
    if token.get("refresh_token"):
        rows.append(
            TokenOrganization(
                token_checksum=_checksum(token["refresh_token"]),
                token_kind=TokenOrganization.Kind.REFRESH_TOKEN,
                organization_id=organization.pk,
                expires=_refresh_expiry(access_expires),
            )
        )
    TokenOrganization.objects.bulk_create(rows)
    request._mcp_organization = organization
    return organization


def prune_token_organizations(now: datetime | None = None) -> int:
    """Delete the rows of expired codes and tokens (and of grants that failed, which expire too);
    returns how many."""
    deleted, _ = TokenOrganization.objects.filter(expires__lt=now or timezone.now()).delete()
    return deleted
