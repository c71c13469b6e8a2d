"""The JWK Set of the access-token signing keys (RFC 7517 §5), at the metadata's ``jwks_uri``
(RFC 8414 §2): every published key (:mod:`mcp_oauth.resource_server.jwt_keys`), the next one
included before it signs and the previous one until it retires. Public, cacheable for
``JWKS_MAX_AGE_SECONDS``; served from this process's key ring (no query while no key changed)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from mcp_oauth.resource_server.jwt_keys import key_ring
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["jwks_view"]


@require_GET
def jwks_view(request: HttpRequest) -> HttpResponse:
    """``{"keys": [public JWK, …]}`` (``kty``, ``crv``/``x``/``y`` or ``n``/``e``, ``kid``, ``alg``, ``use``)."""
    response = JsonResponse(key_ring().jwks())
    response["Cache-Control"] = f"public, max-age={int(mcp_oauth_settings.JWKS_MAX_AGE_SECONDS)}"
    return response
