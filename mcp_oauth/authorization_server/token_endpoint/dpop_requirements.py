"""Who must use DPoP: clients that registered ``dpop_bound_access_tokens`` (RFC 9449 §5.2) and
resources that require it.

Answered from the token endpoint's in-process caches: the set of clients that require DPoP is
one query per clients generation (:func:`mcp_oauth.authorization_server.client_registry.clients.generation_memo`),
a resource's flag comes from the resource registry. A grant of a client that needs no DPoP
therefore costs no query. CIMD clients (URL ``client_id``) are read from their cached document.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q

from mcp_oauth.authorization_server.client_registry.clients import generation_memo, resource_generation
from mcp_oauth.models import ClientMetadataDocument, ClientProfile, ProtectedResource
from mcp_oauth.resource_server.cache import resource_by_uri, resource_from_generation

__all__ = ["client_requires_dpop", "resources_require_dpop"]


def _requiring_clients() -> frozenset[Any]:
    """Primary keys of the clients whose profile says ``dpop_bound_access_tokens`` (the admin
    field, or the flag in the metadata they registered)."""
    return frozenset(
        ClientProfile.objects.filter(
            Q(dpop_bound_access_tokens=True) | Q(metadata__dpop_bound_access_tokens=True)
        ).values_list("application_id", flat=True)
    )


def client_requires_dpop(application: Any) -> bool:
    """Whether the client always uses DPoP (RFC 9449 §5.2 ``dpop_bound_access_tokens: true``): set
    on its :class:`~mcp_oauth.models.ClientProfile` in the admin, in the metadata it registered
    (RFC 7591), or in its Client ID Metadata Document."""
    if application is None:
        return False
    if application.pk in generation_memo("dpop_clients", _requiring_clients):
        return True
    if "://" not in str(application.client_id):
        return False
    document = ClientMetadataDocument.objects.filter(application=application).values_list("document", flat=True).first()
    return isinstance(document, dict) and document.get("dpop_bound_access_tokens") is True


def resources_require_dpop(uris: Iterable[str]) -> bool:
    """Whether any of the (canonical) resource URIs is an enabled resource that requires DPoP."""
    generation = resource_generation()
    for uri in uris:
        resource = resource_from_generation(uri, generation) if generation is not None else None
        if resource is None:
            try:
                resource = resource_by_uri(uri)
            except (ProtectedResource.DoesNotExist, ValueError):
                continue
        if resource.dpop_required:
            return True
    return False
