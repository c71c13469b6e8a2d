"""Each organization's own MCP endpoint: ``<MCP_PATH>/o/<slug>`` (issue 31).

The endpoint is a :class:`~mcp_oauth.models.ProtectedResource` whose ``organization`` is set: it has
its own protected-resource metadata (``/.well-known/oauth-protected-resource<MCP_PATH>/o/<slug>``,
RFC 9728 §3.1, ``resource`` = its URL), its own ``WWW-Authenticate`` challenge naming that
document, and tokens bound to it by audience (RFC 8707) act for that organization alone. It is
served by the same view and ASGI lane as the shared endpoint, in both eras.

With ``MCP_OAUTH["ORGANIZATION_ENDPOINTS"]`` on (the default), :func:`sync_organization_endpoint`
(a ``post_save`` receiver on :class:`~mcp_oauth.models.Organization`, connected by
:mod:`mcp_oauth.wiring`) creates the row when the organization is created, and keeps it in step:
its URI follows the slug, ``enabled`` follows ``is_active``, ``name`` the organization's name; its
scopes are the default resource's (``DEFAULT_RESOURCE_SCOPES`` when there is none) when created,
then the operator's. Nothing is created while ``BASE_URL`` is unset.
"""

from __future__ import annotations

from typing import Any

from mcp_oauth.models import Organization, ProtectedResource
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.organization_paths import endpoint_path
from mcp_oauth.shared.resource_uris import canonicalize_resource

__all__ = ["endpoint_uri", "sync_organization_endpoint"]


def endpoint_uri(slug: str) -> str:
    """The canonical resource URI of an organization's endpoint (``BASE_URL`` + :func:`endpoint_path`)."""
    return canonicalize_resource(mcp_oauth_settings.absolute(endpoint_path(slug)))


def _default_scopes() -> str:
    default = ProtectedResource.objects.filter(is_default=True).values_list("scopes", flat=True).first()
    return default if default is not None else " ".join(mcp_oauth_settings.DEFAULT_RESOURCE_SCOPES)


def sync_organization_endpoint(sender: Any, instance: Organization, created: bool = False, **kwargs: Any) -> None:
    """``post_save`` of an :class:`Organization`: create or update its endpoint's
    :class:`ProtectedResource` (see the module docstring). A fixture load (``raw``) is left alone."""
    if kwargs.get("raw") or not mcp_oauth_settings.ORGANIZATION_ENDPOINTS or not mcp_oauth_settings.BASE_URL:
        return
    uri = endpoint_uri(instance.slug)
    name = str(instance.name or instance.slug)[:200]
    resource = ProtectedResource.objects.filter(organization=instance).order_by("pk").first()
    if resource is None:
        ProtectedResource.objects.update_or_create(
            uri=uri,
            defaults={
                "organization": instance,
                "name": name,
                "scopes": _default_scopes(),
                "enabled": instance.is_active,
                "is_default": False,
            },
        )
        return
    if (resource.uri, resource.enabled, resource.name) != (uri, instance.is_active, name):
        resource.uri, resource.enabled, resource.name = uri, instance.is_active, name
        resource.save(update_fields=["uri", "enabled", "name", "updated"])
