"""``mcp_oauth.resource_server.registry_freeze``: a large resource registry frozen with the worker's
start-up objects, the replaced one freed, frozen objects not piling up across reloads."""

from __future__ import annotations

import gc
import weakref

import pytest

from mcp_oauth.resource_server import registry_freeze
from mcp_oauth.resource_server.cache import bump_resource_generation, resource_by_uri

pytestmark = pytest.mark.django_db


def test_a_process_that_froze_its_start_up_objects_freezes_each_large_registry_and_frees_the_replaced_one(
    resource, monkeypatch
):
    def tracked(obj) -> bool:  # in a collected generation (frozen objects are in none)
        return any(o is obj for o in gc.get_objects())

    gc.freeze()  # what project/asgi.py does once the application is built
    try:
        bump_resource_generation()
        small = resource_by_uri(resource.uri)
        assert tracked(small)  # fewer resources than REFREEZE_MIN_RESOURCES: left to the collector
        monkeypatch.setattr(registry_freeze, "REFREEZE_MIN_RESOURCES", 1)
        bump_resource_generation()
        loaded = resource_by_uri(resource.uri)
        assert loaded is not small
        assert not tracked(loaded)  # frozen with the start-up objects: no full collection walks it
        frozen = gc.get_freeze_count()
        replaced = weakref.ref(loaded)
        del loaded
        bump_resource_generation()
        again = resource_by_uri(resource.uri)
        assert not tracked(again)
        assert replaced() is None  # the replaced registry's rows were freed, frozen or not
        assert gc.get_freeze_count() <= frozen + 100  # reloads do not pile up frozen objects
    finally:
        gc.unfreeze()
