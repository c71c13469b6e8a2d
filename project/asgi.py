"""ASGI entry point of the reference site.

The MCP endpoint is served by the lean lane (:func:`mcp_oauth.mcp_server.transport.asgi.mcp_lane`) before
Django's middleware stack, the token endpoint by the token lane in one thread hop
(:func:`mcp_oauth.authorization_server.asgi.token_lane`); every other path (pages, admin, the
other OAuth endpoints) by Django. With MCP_REQUEST_LOG=1 every request but the probes is logged
as one JSON line (:func:`mcp_oauth.observability.request_log.request_log_lane`). The health
probes (``/healthz``, ``/readyz``) and the ASGI
lifespan are answered first, by :func:`mcp_oauth.health.health_lane` (it chains the drain
handler that ends open streams on SIGTERM, :mod:`mcp_oauth.mcp_server.transport.drain`).

Once the application is built, everything it loaded (modules, settings, URL patterns, the apps'
models and admin: ~130,000 objects) is moved out of the garbage collector's reach with
:func:`gc.freeze`: they live as long as the process, and a full collection would otherwise walk
all of them (~120 ms on a small machine) every few thousand requests.
"""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application = get_asgi_application()

from mcp_oauth.authorization_server.asgi import token_lane  # noqa: E402 - after Django is set up
from mcp_oauth.health import health_lane  # noqa: E402
from mcp_oauth.mcp_server.transport.asgi import mcp_lane  # noqa: E402
from mcp_oauth.observability.request_log import request_log_lane  # noqa: E402
from mcp_oauth.observability.tracing_http import oauth_tracing_lane  # noqa: E402

# health_lane outermost: the probes before anything else, and the drain hook on lifespan.startup;
# then the OAuth endpoints' spans (tracing on; absent when off) and the JSON request log
# (MCP_REQUEST_LOG=1; absent when off), outside the two lanes so that they see every request.
application = health_lane(oauth_tracing_lane(request_log_lane(token_lane(mcp_lane(django_application)))))
gc.freeze()
