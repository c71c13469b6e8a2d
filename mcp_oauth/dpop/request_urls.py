"""The URL of a request as a DPoP proof's ``htu`` may name it (RFC 9449 §4.3 step 9)."""

from __future__ import annotations

from django.http import HttpRequest

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.origins import as_requested

__all__ = ["canonical_url", "request_urls"]


def canonical_url(request: HttpRequest) -> list[str]:
    """``[request's URL in BASE_URL's spelling]``: what clients see behind a proxy, and the
    spelling of every resource URI."""
    return [mcp_oauth_settings.absolute(request.path)]


def request_urls(request: HttpRequest) -> list[str]:
    """``request``'s URL in ``BASE_URL``'s spelling (what clients see behind a proxy, and the
    spelling of every resource URI) and, on a loopback development site, in the loopback spelling
    it used (:mod:`mcp_oauth.shared.origins`). Never built from the ``Host`` header alone."""
    url = mcp_oauth_settings.absolute(request.path)
    return [url, as_requested(url, request)]
