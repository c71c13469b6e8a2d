"""The default protected resource (mcp_oauth.resource_server.default_resource): created from
``BASE_URL`` + ``MCP_PATH`` with the settings' name and scopes, kept, moved when ``BASE_URL``
changes, re-enabled when it comes back; nothing without ``BASE_URL``."""

from __future__ import annotations

import pytest

from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.default_resource import ensure_default_resource, sync_default_resource

pytestmark = pytest.mark.django_db


def test_created_from_the_settings_then_kept(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "DEFAULT_RESOURCE_NAME": "Files",
        "DEFAULT_RESOURCE_SCOPES": ["mcp", "files:read"],
    }
    ProtectedResource.objects.all().delete()
    resource = ensure_default_resource()
    assert (resource.uri, resource.name, resource.scopes, resource.is_default) == (
        "http://testserver/mcp",
        "Files",
        "mcp files:read",
        True,
    )
    assert ensure_default_resource().pk == resource.pk
    assert ProtectedResource.objects.count() == 1


def test_a_new_base_url_moves_the_default_and_the_old_one_comes_back(settings):
    ProtectedResource.objects.all().delete()
    first = ensure_default_resource()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://testserver:8001", "MCP_PATH": "/api/mcp"}
    moved = ensure_default_resource()
    assert moved.uri == "http://testserver:8001/api/mcp"
    assert list(ProtectedResource.objects.filter(is_default=True).values_list("uri", flat=True)) == [moved.uri]
    ProtectedResource.objects.filter(pk=first.pk).update(enabled=False)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://testserver", "MCP_PATH": "/mcp"}
    back = ensure_default_resource()
    assert (back.pk, back.is_default, back.enabled) == (first.pk, True, True)
    assert ProtectedResource.objects.filter(is_default=True).count() == 1


def test_after_migrate_nothing_happens_without_a_base_url(settings):
    ProtectedResource.objects.all().delete()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": None}
    sync_default_resource(sender=None)
    assert ProtectedResource.objects.count() == 0
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://testserver"}
    sync_default_resource(sender=None)
    assert list(ProtectedResource.objects.values_list("uri", "is_default")) == [("http://testserver/mcp", True)]
