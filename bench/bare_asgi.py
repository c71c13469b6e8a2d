"""ASGI application of the bench's floor: Django's plain handler with bench.bare_settings (no MCP lane)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.bare_settings")
application = get_asgi_application()
