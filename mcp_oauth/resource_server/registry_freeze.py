"""The resource registry frozen with a worker's start-up objects (``gc.freeze()``).

With thousands of protected resources (10,000 organizations, each with its own endpoint) the
registry of :mod:`mcp_oauth.resource_server.cache` holds ~70,000 objects that every full collection
of the cyclic garbage collector would walk again; :func:`refreeze` puts them with the objects the
process froze at start-up (``project/asgi.py``).
"""

from __future__ import annotations

import gc

__all__ = ["REFREEZE_MIN_RESOURCES", "refreeze"]

#: From how many resources :func:`refreeze` freezes a loaded registry (below, its rows are too few
#: to matter to a full collection, and a reload costs no collection).
REFREEZE_MIN_RESOURCES = 1000


def refreeze(resources: int) -> None:
    """When this process froze its start-up objects (``gc.freeze()``, as ``project/asgi.py`` does)
    and the registry just loaded holds ``resources`` >= :data:`REFREEZE_MIN_RESOURCES`, put it with
    them: otherwise every full collection walks its rows again (10,000 organizations: ~70,000
    objects, a full collection ~7x as long as without them).

    ``gc.unfreeze()``, a full ``gc.collect()`` and ``gc.freeze()`` again, so that what is frozen is
    what is reachable now: a registry replaced by a reload is freed (its rows hold no cycles, so
    reference counting frees them even while frozen), and any cyclic garbage frozen by the previous
    reload (objects of requests then in flight) is collected here. Frozen garbage is thus bounded
    by what was alive at the last reload, not by the number of reloads. Costs one full collection
    over every object of the process per reload (a resource or organization saved; ``project/asgi.py``
    gives ~120 ms for ~130,000 objects on a small machine); nothing when the process froze nothing
    (tests, ``runserver``) or the registry is small."""
    if resources >= REFREEZE_MIN_RESOURCES and gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
        gc.freeze()
