"""How long what the authorization server issues lives: access tokens, refresh-token idle windows,
sessions (docs/how-to/session-lengths.md).

* :func:`access_token_lifetime` — the ``expires_in`` of one issuance (RFC 6749 §5.1), in seconds.
  It is oauthlib's callable ``expires_in`` (:class:`mcp_oauth.authorization_server.server.MCPServer`):
  oauthlib calls it once per token response and sets ``request.expires_in`` to its value before
  the token generator runs, and the saved ``AccessToken.expires`` is *now + that value*, so the
  database and the JSON answer agree. The most specific value wins:

  1. the client's ``ClientProfile.access_token_lifetime``;
  2. the protected resource's ``ProtectedResource.access_token_lifetime`` (the resource the token
     is bound to, RFC 8707);
  3. the organization's ``Organization.access_token_lifetime`` when the grant acts for one;
  4. the site's ``OAUTH2_PROVIDER["ACCESS_TOKEN_EXPIRE_SECONDS"]``;

  then the adapter's :meth:`~mcp_oauth.adapter.DefaultMCPAdapter.access_token_lifetime` may change
  it (per user, per scope…).

  An organization's lifetime is also a ceiling for the grants that act for it: an organization
  administrator may shorten its members' tokens, and a client or resource value does not lengthen
  them past it.
* :func:`refresh_token_idle_seconds` — how long a refresh token may go unused: the client's
  ``refresh_token_idle_lifetime``, never longer than the site's
  ``OAUTH2_PROVIDER["REFRESH_TOKEN_EXPIRE_SECONDS"]`` (which DOT's ``cleartokens`` applies), else
  the site's. Each refresh issues a new refresh token, so the window slides with use.
* :func:`session_max_seconds` — the absolute session cap from the authorization: the client's
  ``session_max_lifetime``, else ``MCP_OAUTH["SESSION_MAX_SECONDS"]``; None: no cap.

The per-client values are read once per clients generation
(:func:`~mcp_oauth.authorization_server.client_registry.clients.generation_memo`, ended by a saved
``ClientProfile``), the resource and the organization from the resource registry: a token response
costs no extra query for them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NamedTuple

from django.db.models import Q
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.authorization_server.client_registry.clients import generation_memo
from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.models import ClientProfile
from mcp_oauth.resource_server.cache import organization_by_pk
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "ClientLifetimes",
    "access_token_lifetime",
    "client_lifetimes",
    "refresh_token_idle_seconds",
    "session_max_seconds",
    "site_access_token_lifetime",
    "site_refresh_token_idle_seconds",
]


class ClientLifetimes(NamedTuple):
    """A client's own values (seconds; None: not set, the next rule applies)."""

    access_token: int | None = None
    refresh_token_idle: int | None = None
    session_max: int | None = None


_NONE = ClientLifetimes()


def _clients_with_lifetimes() -> dict[Any, ClientLifetimes]:
    """``{application pk: ClientLifetimes}`` of every client whose profile sets one of them (one query)."""
    rows = ClientProfile.objects.filter(
        Q(access_token_lifetime__isnull=False)
        | Q(refresh_token_idle_lifetime__isnull=False)
        | Q(session_max_lifetime__isnull=False)
    ).values_list("application_id", "access_token_lifetime", "refresh_token_idle_lifetime", "session_max_lifetime")
    return {pk: ClientLifetimes(*(value or None for value in values)) for pk, *values in rows}


def client_lifetimes(application: Any) -> ClientLifetimes:
    """The lifetimes ``application`` (a DOT ``Application``, or None) sets on its profile."""
    if application is None or getattr(application, "pk", None) is None:
        return _NONE
    return generation_memo("client_lifetimes", _clients_with_lifetimes).get(application.pk, _NONE)


def _seconds(value: Any) -> int | None:
    """A lifetime setting as whole seconds (an int, a float or a ``timedelta``); None or 0: none."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    try:
        seconds = int(value or 0)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def site_access_token_lifetime() -> int:
    """``OAUTH2_PROVIDER["ACCESS_TOKEN_EXPIRE_SECONDS"]`` in seconds (at least 1)."""
    return _seconds(oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS) or 1


def site_refresh_token_idle_seconds() -> int | None:
    """``OAUTH2_PROVIDER["REFRESH_TOKEN_EXPIRE_SECONDS"]`` in seconds; None: refresh tokens never idle out."""
    return _seconds(oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS)


def _resource(request: Any):
    """The protected resource the token is bound to (``request.resource``, set by the validator's
    resource binding), from the registry; None when it cannot be told (the token save refuses it)."""
    bound = getattr(request, "resource", None) or []
    resources = [bound] if isinstance(bound, str) else [uri for uri in bound if isinstance(uri, str)]
    try:
        return select_resource(resources[:1])
    except InvalidTarget:
        return None


def _organization_lifetime(request: Any, resource: Any) -> int | None:
    """The access-token lifetime of the organization the grant acts for, when it sets one."""
    organization_id = getattr(resource, "organization_id", None)
    if organization_id is None:
        organization_id = getattr(request, "mcp_lifetime_organization_id", None)
    if organization_id is None:
        return None
    organization = organization_by_pk(organization_id)
    return _seconds(getattr(organization, "access_token_lifetime", None)) if organization is not None else None


def access_token_lifetime(request: Any) -> int:
    """The access-token lifetime of this issuance, in seconds (see the module docstring for the order).

    :param request: the oauthlib request of a token response: ``request.client`` the DOT
        ``Application``, ``request.resource`` the canonical resource URIs the token is bound to,
        ``request.mcp_lifetime_organization_id`` the organization the grant acts for when known.
    :returns: a positive number of seconds (oauthlib's ``expires_in``).
    """
    resource = _resource(request)
    organization_value = _organization_lifetime(request, resource)
    value = (
        client_lifetimes(getattr(request, "client", None)).access_token
        or _seconds(getattr(resource, "access_token_lifetime", None))
        or organization_value
        or site_access_token_lifetime()
    )
    if organization_value is not None:
        value = min(value, organization_value)
    chosen = mcp_oauth_settings.adapter.access_token_lifetime(request, value)
    try:
        return max(1, int(chosen))
    except (TypeError, ValueError):
        return value


def refresh_token_idle_seconds(application: Any) -> int | None:
    """How long a refresh token of ``application`` may go unused (seconds); None: no idle limit."""
    site = site_refresh_token_idle_seconds()
    own = client_lifetimes(application).refresh_token_idle
    if own is None:
        return site
    return own if site is None else min(own, site)


def session_max_seconds(application: Any) -> int | None:
    """The absolute session cap of ``application`` from the authorization (seconds); None: no cap."""
    own = client_lifetimes(application).session_max
    return own if own is not None else _seconds(mcp_oauth_settings.SESSION_MAX_SECONDS)
