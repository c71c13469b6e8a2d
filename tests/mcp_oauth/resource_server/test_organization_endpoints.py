"""Each organization's own endpoint (issue 31): its ProtectedResource created with the organization
and kept in step with its slug and is_active, its own metadata and its own challenge."""

from __future__ import annotations

import pytest
from django.test import Client

from mcp_oauth.models import Organization, ProtectedResource
from mcp_oauth.resource_server.organization_endpoints import endpoint_uri

pytestmark = pytest.mark.django_db


def test_creating_an_organization_creates_its_endpoint_with_the_default_resources_scopes(resource):
    resource.scopes = "mcp profile"
    resource.save()
    acme = Organization.objects.create(slug="acme", name="Acme Corp")
    row = ProtectedResource.objects.get(organization=acme)
    assert (row.uri, row.name, row.scopes, row.enabled, row.is_default) == (
        "http://testserver/mcp/o/acme",
        "Acme Corp",
        "mcp profile",
        True,
        False,
    )
    assert endpoint_uri("acme") == row.uri


def test_the_endpoint_follows_the_slug_the_name_and_is_active(resource):
    acme = Organization.objects.create(slug="acme", name="Acme")
    acme.slug, acme.name, acme.is_active = "acme-eu", "Acme EU", False
    acme.save()
    row = ProtectedResource.objects.get(organization=acme)
    assert (row.uri, row.name, row.enabled) == ("http://testserver/mcp/o/acme-eu", "Acme EU", False)
    assert ProtectedResource.objects.filter(organization=acme).count() == 1
    acme.is_active = True
    acme.save()
    assert ProtectedResource.objects.get(organization=acme).enabled is True


def test_no_endpoint_when_the_setting_is_off(resource, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ORGANIZATION_ENDPOINTS": False}
    acme = Organization.objects.create(slug="acme", name="Acme")
    assert not ProtectedResource.objects.filter(organization=acme).exists()
    assert Client().get("/.well-known/oauth-protected-resource/mcp/o/acme").status_code == 404


def test_its_metadata_names_its_own_url(resource):
    Organization.objects.create(slug="acme", name="Acme")
    response = Client().get("/.well-known/oauth-protected-resource/mcp/o/acme")
    assert response.status_code == 200
    data = response.json()
    assert data["resource"] == "http://testserver/mcp/o/acme"
    assert data["resource_name"] == "Acme"
    assert data["scopes_supported"] == ["mcp"]
    assert data["authorization_servers"] == ["http://testserver"]


def test_its_challenge_points_at_its_own_metadata(resource):
    Organization.objects.create(slug="acme", name="Acme")
    response = Client().post("/mcp/o/acme", "{}", content_type="application/json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == (
        'Bearer resource_metadata="http://testserver/.well-known/oauth-protected-resource/mcp/o/acme", scope="mcp"'
    )


@pytest.mark.parametrize("path", ["/mcp/o/nobody", "/mcp/o/inactive"])
def test_an_unknown_or_inactive_organizations_endpoint_is_404(resource, path):
    Organization.objects.create(slug="inactive", name="Gone", is_active=False)
    response = Client().post(path, "{}", content_type="application/json")
    assert response.status_code == 404
    assert response.json()["error"] == {"code": -32600, "message": "Not Found: no MCP endpoint at this URL"}
    assert Client().get("/.well-known/oauth-protected-resource" + path).status_code == 404
