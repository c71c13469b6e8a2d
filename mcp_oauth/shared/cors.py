"""CORS for browser-based MCP clients (Fetch standard), on the endpoints that may have it.

The well-known documents, token, revocation, registration and MCP endpoints
answer preflights and expose the MCP headers; the authorization endpoint never
gets CORS (RFC 9700 §2.6 / OAuth 2.1 §3.1: it is navigated to, not fetched).

Every answer of such an endpoint carries the CORS headers, the overload answer too: a database
or cache that is away (:func:`mcp_oauth.shared.overload.is_unavailable_error`) gives the 503 +
``Retry-After`` of :func:`~mcp_oauth.shared.overload.unavailable_response` here, inside the CORS
wrapper, so that a browser client can read it (``Retry-After`` is exposed) instead of seeing an
opaque network error.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from urllib.parse import urlsplit

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponse

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.overload import is_unavailable_error, unavailable_response

logger = logging.getLogger("mcp_oauth.overload")

# Mcp-Method / Mcp-Name: required on 2026-07-28 requests ("Transports", standard headers); the
# Mcp-Param-<name> headers of a tool's x-mcp-header arguments are allowed as the preflight asks.
# DPoP / DPoP-Nonce: RFC 9449 §4.1, §8 (a browser client sends proofs and reads nonces)
ALLOW_HEADERS = (
    "Authorization, Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, "
    "Last-Event-ID, DPoP"
)
PARAM_HEADER_PREFIX = "mcp-param-"
EXPOSE_HEADERS = "WWW-Authenticate, Mcp-Session-Id, MCP-Protocol-Version, Retry-After, DPoP-Nonce"
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


def allow_headers(request: HttpRequest) -> str:
    """``Access-Control-Allow-Headers`` of a preflight: :data:`ALLOW_HEADERS` and the
    ``Mcp-Param-*`` headers the preflight names (a tool's ``x-mcp-header`` arguments)."""
    asked = request.headers.get("Access-Control-Request-Headers", "")
    params = [h.strip() for h in asked.split(",") if h.strip().lower().startswith(PARAM_HEADER_PREFIX)]
    valid = [h for h in params if len(h) <= 128 and h.replace("-", "").replace("_", "").isalnum()]
    return ", ".join([ALLOW_HEADERS, *valid[:32]])


def origin_allowed(origin: str) -> bool:
    """Whether a browser ``Origin`` may call the MCP endpoint (DNS-rebinding defence).

    Allowed: the site's own origin (``BASE_URL``), ``ALLOWED_ORIGINS``, and with
    ``ALLOW_LOOPBACK_ORIGINS`` any http(s) origin on a loopback host and port (a
    rebinding page keeps its own, non-loopback origin). ``"*"`` in
    ``ALLOWED_ORIGINS`` allows every origin.
    """
    origin = origin.strip().rstrip("/").lower()
    if not origin or origin == "null":
        return False
    allowed = {o.rstrip("/").lower() for o in mcp_oauth_settings.ALLOWED_ORIGINS}
    if "*" in allowed or origin in allowed or origin == mcp_oauth_settings.base_url.lower():
        return True
    if mcp_oauth_settings.ALLOW_LOOPBACK_ORIGINS:
        try:
            parts = urlsplit(origin)
            parts.port  # noqa: B018 - validates the port
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and parts.hostname in LOOPBACK_HOSTS and not parts.path
    return False


def _decorate(view: Callable, methods: str, origin_check: Callable[[str], bool] | None) -> Callable:
    """Wrap ``view``: answer preflights, add CORS headers to every response for an allowed origin."""

    def allowed_origin(request: HttpRequest) -> str | None:
        origin = request.headers.get("Origin")
        if not origin:
            return None
        if origin_check is None:
            return "*"
        return origin if origin_check(origin) else None

    def add_headers(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        value = allowed_origin(request)
        if value:
            response["Access-Control-Allow-Origin"] = value
            response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
            if value != "*":
                response["Vary"] = "Origin"
        return response

    def preflight(request: HttpRequest) -> HttpResponse:
        response = HttpResponse(status=204)
        if allowed_origin(request):
            response["Access-Control-Allow-Methods"] = methods
            response["Access-Control-Allow-Headers"] = allow_headers(request)
            response["Access-Control-Max-Age"] = "600"
        return add_headers(request, response)

    def is_preflight(request: HttpRequest) -> bool:
        return request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers

    if iscoroutinefunction(view):

        @functools.wraps(view)
        async def async_wrapper(request: HttpRequest, *args, **kwargs):
            if is_preflight(request):
                return preflight(request)
            try:
                response = await view(request, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - _unavailable() re-raises all but an unavailable DB/cache
                response = _unavailable(exc)
            return add_headers(request, response)

        return async_wrapper

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if is_preflight(request):
            return preflight(request)
        try:
            response = view(request, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - _unavailable() re-raises all but an unavailable DB/cache
            response = _unavailable(exc)
        return add_headers(request, response)

    return wrapper


def _unavailable(exc: Exception) -> HttpResponse:
    """The 503 answer for ``exc`` when the database or cache is away; anything else propagates."""
    if not is_unavailable_error(exc):
        raise exc
    logger.warning("answering 503: %s: %s", type(exc).__name__, exc)
    return unavailable_response()


def public_cors(view: Callable, methods: str = "GET, POST, OPTIONS") -> Callable:
    """CORS for credential-less public endpoints: any origin, no cookies (``*``)."""
    return _decorate(view, methods, None)


def mcp_cors(view: Callable, methods: str = "GET, POST, DELETE, OPTIONS") -> Callable:
    """CORS for the MCP endpoint: only origins that pass :func:`origin_allowed`."""
    return _decorate(view, methods, origin_allowed)
