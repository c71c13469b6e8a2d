"""``mcp_oauth.resource_server.registry_freeze``: a registry grown large frozen with the worker's
start-up objects, the replaced one freed, frozen objects not piling up across reloads."""

from __future__ import annotations

import gc
import weakref

import pytest

from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server import registry_freeze
from mcp_oauth.resource_server.cache import bump_resource_generation, resource_by_uri
from mcp_oauth.resource_server.organization_endpoints import endpoint_uri
from tests.support.organizations import organization

pytestmark = pytest.mark.django_db


def tracked(obj) -> bool:  # in a collected generation (frozen objects are in none)
    return any(o is obj for o in gc.get_objects())


def test_a_process_that_froze_its_start_up_objects_freezes_the_registry_as_it_doubles_and_frees_the_replaced_one(
    resource, monkeypatch
):
    site_wide = ProtectedResource.objects.enabled().filter(organization__isnull=True).count()
    uris = [endpoint_uri(organization(f"freeze-{n}").slug) for n in range(site_wide + 2)]
    gc.freeze()  # what project/asgi.py does once the application is built
    try:
        bump_resource_generation()
        small = resource_by_uri(uris[0])
        assert tracked(small)  # fewer resources than REFREEZE_MIN_RESOURCES: left to the collector
        monkeypatch.setattr(registry_freeze, "REFREEZE_MIN_RESOURCES", site_wide + 1)
        bump_resource_generation()
        site = resource_by_uri(resource.uri)  # the load: the site-wide resources, below the minimum
        assert tracked(site)
        loaded = resource_by_uri(uris[0])  # one more: the minimum reached, all frozen
        assert not tracked(loaded)
        assert not tracked(site)
        held = site_wide + 1
        for uri in uris[1:-1]:  # not doubled since the last freeze: left to the collector
            assert tracked(resource_by_uri(uri))
            held += 1
        assert held + 1 == 2 * (site_wide + 1)
        assert not tracked(resource_by_uri(uris[-1]))  # doubled: frozen again
        frozen = gc.get_freeze_count()
        replaced = weakref.ref(loaded)
        del loaded, site
        bump_resource_generation()
        for uri in uris:
            resource_by_uri(uri)
        assert replaced() is None  # the replaced registry's rows were freed, frozen or not
        assert gc.get_freeze_count() <= frozen + 100  # reloads do not pile up frozen objects
    finally:
        gc.unfreeze()
