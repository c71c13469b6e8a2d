"""The protected-resource registry of :mod:`mcp_oauth.resource_server.cache` with organizations'
endpoints: a load reads the site-wide resources only; an organization's endpoint and an unknown
URI cost one query the first time a generation is asked for them, none after; a change of
generation forgets both (issue 31: a worker holds the organizations it serves, not all of them)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.cache import (
    _registry,
    bump_resource_generation,
    organization_by_pk,
    resource_by_uri,
)
from mcp_oauth.resource_server.organization_endpoints import endpoint_uri
from tests.support.organizations import organization

pytestmark = pytest.mark.django_db


def test_a_load_reads_the_site_wide_resources_and_an_organizations_endpoint_once_asked_for(resource):
    orgs = [organization(f"lazy-{n}") for n in range(5)]
    bump_resource_generation()
    assert resource_by_uri(resource.uri) == resource
    held = set(_registry._by_uri)
    assert held == set(
        ProtectedResource.objects.enabled().filter(organization__isnull=True).values_list("uri", flat=True)
    )
    with CaptureQueriesContext(connection) as first:
        found = resource_by_uri(endpoint_uri(orgs[2].slug))
    assert found.organization == orgs[2]
    assert len(first) == 1  # its row and its organization, one query
    with CaptureQueriesContext(connection) as again:
        assert resource_by_uri(endpoint_uri(orgs[2].slug)) is found
        assert organization_by_pk(orgs[2].pk) is found.organization  # kept with its endpoint
    assert len(again) == 0
    assert set(_registry._by_uri) == held | {endpoint_uri(orgs[2].slug)}  # not the other four


def test_an_unknown_uri_costs_one_query_per_generation_and_a_new_organization_is_found_at_once(resource):
    uri = endpoint_uri("not-yet")
    bump_resource_generation()
    resource_by_uri(resource.uri)
    with CaptureQueriesContext(connection) as first:
        with pytest.raises(ProtectedResource.DoesNotExist):
            resource_by_uri(uri)
    with CaptureQueriesContext(connection) as again:
        with pytest.raises(ProtectedResource.DoesNotExist):
            resource_by_uri(uri)
    assert (len(first), len(again)) == (1, 0)
    org = organization("not-yet")  # saved: a new generation, the miss forgotten
    assert resource_by_uri(uri).organization == org


def test_a_disabled_organization_endpoint_stops_being_served_at_once(resource):
    org = organization("soon-off")
    uri = endpoint_uri(org.slug)
    bump_resource_generation()
    served = resource_by_uri(uri)
    served_again = ProtectedResource.objects.get(pk=served.pk)
    served_again.enabled = False
    served_again.save()
    with pytest.raises(ProtectedResource.DoesNotExist):
        resource_by_uri(uri)


def test_the_unknown_uris_remembered_are_bounded(resource, monkeypatch):
    monkeypatch.setattr(type(_registry), "MISSES_KEPT", 4)
    bump_resource_generation()
    resource_by_uri(resource.uri)
    for n in range(50):
        with pytest.raises(ProtectedResource.DoesNotExist):
            resource_by_uri(endpoint_uri(f"nobody-{n}"))
    assert len(_registry._misses) <= 4
