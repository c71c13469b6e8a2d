"""Resource indicators at the authorization server (RFC 8707 §2)."""

from __future__ import annotations

from collections.abc import Iterable

from mcp_oauth.authorization_server.client_registry.clients import resource_generation
from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.cache import default_resource, resource_by_uri, resource_from_generation
from mcp_oauth.shared.origins import base_spelling
from mcp_oauth.shared.resource_uris import InvalidResource, canonicalize_resource


class InvalidTarget(Exception):
    """RFC 8707 ``invalid_target``: the resource is invalid, unknown, or more than one was asked for."""


def select_resource(values: Iterable[str]) -> ProtectedResource:
    """The registered resource a request asks for.

    :param values: the request's ``resource`` parameters; empty strings count as absent (OAuth 2.1 §3.1).
    :returns: the matching enabled :class:`ProtectedResource`, or the default one when none was given
        (a token is never unrestricted); from the resource registry
        (:mod:`mcp_oauth.resource_server.cache`): a shared row, not to be modified.
    :raises InvalidTarget: a value that is not a resource URI, a URI we do not serve, more than one
        resource (tokens are bound to one), or no default resource configured.
    """
    given = [value for value in values if value != ""]
    if len(given) > 1:
        raise InvalidTarget("Only one resource may be requested; a token is bound to one resource.")
    try:
        if given:
            # ProtectedResource.objects.get_by_uri, from the registry (a token request read its generation).
            uri = base_spelling(canonicalize_resource(given[0]))
            return resource_from_generation(uri, resource_generation()) or resource_by_uri(uri)
        return default_resource()
    except InvalidResource as exc:
        raise InvalidTarget(f"The resource is not a valid resource indicator: {exc}.") from None
    except ProtectedResource.DoesNotExist:
        if given:
            raise InvalidTarget("The resource is not served by this authorization server.") from None
        raise InvalidTarget("No resource was given and no default resource is configured.") from None
