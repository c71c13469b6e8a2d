"""Who may introspect what (RFC 7662 §4: the authorization server must restrict who learns what).

Introspection tells the caller a token's user, client, scopes and expiry. Only a client marked as
the resource server of a resource (``ClientProfile.resource_server_for``, editable in the admin)
learns anything, and only of tokens whose audience (their RFC 8707 ``resource`` list) names one
of its enabled resources. Every other authenticated caller — a normal client, a client asking
about its own tokens, a bearer token of scope ``introspection`` — gets ``{"active": false}``
(RFC 7662 §2.2: the server may answer inactive rather than say why). A token without audience is
nobody's: this server binds every token it issues for a resource to that resource.

The decision is the adapter's: :meth:`mcp_oauth.adapter.DefaultMCPAdapter.may_introspect`
calls :func:`may_introspect`.
"""

from __future__ import annotations

from typing import Any

from mcp_oauth.models import ProtectedResource
from mcp_oauth.shared.resource_uris import InvalidResource, canonicalize_resource

__all__ = ["may_introspect", "served_resources", "token_audiences"]


def token_audiences(token: Any) -> set[str]:
    """The canonical resource URIs of a DOT ``AccessToken``'s ``resource`` (RFC 8707), malformed ones left out."""
    audiences = set()
    for uri in token.resource or []:
        try:
            audiences.add(canonicalize_resource(str(uri)))
        except InvalidResource:
            continue
    return audiences


def served_resources(client: Any) -> set[str]:
    """The URIs of the enabled resources ``client`` (a DOT ``Application``) is the resource server of."""
    if client is None or client.pk is None:
        return set()
    return set(
        ProtectedResource.objects.enabled()
        .filter(resource_server_clients__application=client)
        .values_list("uri", flat=True)
    )


def may_introspect(client: Any, token: Any) -> bool:
    """Whether ``client`` (the authenticated caller, a DOT ``Application``; ``None`` when unknown) may
    learn about ``token`` (a DOT ``AccessToken``): it is the resource server of one of the token's
    audiences (RFC 7662 §4)."""
    audiences = token_audiences(token)
    return bool(audiences) and bool(audiences & served_resources(client))
