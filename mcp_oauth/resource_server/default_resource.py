"""The default protected resource: the MCP endpoint at ``BASE_URL`` + ``MCP_PATH`` (RFC 9728 §2).

:func:`ensure_default_resource` creates or moves it; :func:`sync_default_resource` is the
``post_migrate`` receiver connected by :mod:`mcp_oauth.wiring`.
"""

from __future__ import annotations

from django.db import transaction

from mcp_oauth.models import ProtectedResource
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.resource_uris import canonicalize_resource

__all__ = ["ensure_default_resource", "sync_default_resource"]


def sync_default_resource(**kwargs) -> None:
    """After ``migrate``: make the default resource match ``BASE_URL`` + ``MCP_PATH``.

    Creates it when missing, or moves the default flag and URI when ``BASE_URL``
    changed (say another port). Does nothing when ``BASE_URL`` is unset.
    """
    if not mcp_oauth_settings.BASE_URL:
        return
    ensure_default_resource()


def ensure_default_resource():
    """Create or update the default :class:`~mcp_oauth.models.ProtectedResource`; return it."""
    uri = canonicalize_resource(mcp_oauth_settings.absolute(mcp_oauth_settings.MCP_PATH))
    with transaction.atomic():
        current = ProtectedResource.objects.filter(is_default=True).first()
        if current is not None and current.uri == uri:
            return current
        ProtectedResource.objects.filter(is_default=True).update(is_default=False)
        resource, created = ProtectedResource.objects.get_or_create(
            uri=uri,
            defaults={
                "name": mcp_oauth_settings.DEFAULT_RESOURCE_NAME,
                "scopes": " ".join(mcp_oauth_settings.DEFAULT_RESOURCE_SCOPES),
                "is_default": True,
            },
        )
        if not created:
            resource.is_default = True
            resource.enabled = True
            resource.save(update_fields=["is_default", "enabled", "updated"])
        return resource
