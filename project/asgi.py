"""ASGI entry point of the reference site.

The MCP endpoint is served by the lean lane (:func:`mcp_oauth.transport.asgi.mcp_lane`) before
Django's middleware stack, the token endpoint by the token lane in one thread hop
(:func:`mcp_oauth.authorization_server.asgi.token_lane`); every other path (pages, admin, the
other OAuth endpoints) by Django.

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
from mcp_oauth.transport.asgi import mcp_lane  # noqa: E402

application = token_lane(mcp_lane(django_application))
gc.freeze()
