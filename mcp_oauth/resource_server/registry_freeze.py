"""The resource registry frozen with a worker's start-up objects (``gc.freeze()``).

A worker serving thousands of organizations' endpoints (each its own protected resource) comes to
hold, in the registry of :mod:`mcp_oauth.resource_server.cache`, ~7 objects per endpoint it has
served that every full collection of the cyclic garbage collector would walk again; the registry
calls :func:`refreeze` each time it has doubled past :data:`REFREEZE_MIN_RESOURCES` (and after a
load of that many site-wide resources), which puts them with the objects the process froze at
start-up (``project/asgi.py``): a full collection per doubling at most, per generation.
"""

from __future__ import annotations

import gc

__all__ = ["REFREEZE_MIN_RESOURCES", "refreeze"]

#: From how many resources :func:`refreeze` freezes a loaded registry (below, its rows are too few
#: to matter to a full collection, and a reload costs no collection).
REFREEZE_MIN_RESOURCES = 1000


def refreeze(resources: int) -> None:
    """When this process froze its start-up objects (``gc.freeze()``, as ``project/asgi.py`` does)
    and the registry holds ``resources`` >= :data:`REFREEZE_MIN_RESOURCES`, put it with them:
    otherwise every full collection walks its rows again (10,000 organizations' endpoints: ~70,000
    objects, a full collection ~7x as long as without them).

    ``gc.unfreeze()``, a full ``gc.collect()`` and ``gc.freeze()`` again, so that what is frozen is
    what is reachable now: a registry replaced by a reload is freed (its rows hold no cycles, so
    reference counting frees them even while frozen), and any cyclic garbage frozen by the previous
    reload (objects of requests then in flight) is collected here. Frozen garbage is thus bounded
    by what was alive at the last reload, not by the number of reloads. Costs one full collection
    over every object of the process each time it freezes (``project/asgi.py`` gives ~120 ms for
    ~130,000 objects on a small machine); nothing when the process froze nothing
    (tests, ``runserver``) or the registry is small."""
    if resources >= REFREEZE_MIN_RESOURCES and gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
        gc.freeze()
