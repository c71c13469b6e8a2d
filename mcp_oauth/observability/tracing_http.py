"""Spans of the OAuth endpoints: an ASGI wrapper keyed by URL name (token, authorize, register,
revoke, introspect, the metadata documents).

Wrap the site's ASGI application with :func:`oauth_tracing_lane`, outside the lanes that serve
paths before Django (the token lane)::

    application = health_lane(oauth_tracing_lane(token_lane(mcp_lane(django_application))))

With tracing off it returns the application itself: nothing is added to any request. With tracing
on, a path is looked at only when it starts with ``/oauth/`` or holds ``/.well-known/`` (the MCP
endpoint and the pages go straight through); such a path is resolved once through the URLconf
(cached) and, when its URL name is one of :data:`OAUTH_URL_NAMES` or it is a well-known metadata
document, served inside a SERVER span (parent: the request's ``traceparent`` header):

* name ``{http.request.method} {http.route}`` (the URL pattern, e.g. ``POST /oauth/token``);
* ``http.request.method``, ``http.route``, ``http.response.status_code``, ``oauth.endpoint``
  (``token``, ``authorize``, ``register``, ``revoke``, ``introspect``, ``metadata``),
  ``oauth.grant_type``, ``oauth.client_auth_method``, ``oauth.outcome`` (``ok`` or ``error``),
  ``error.type`` (the OAuth error code of a refusal, else the status of a 5xx; status ERROR for
  a 5xx) — see :mod:`.tracing_oauth`: never a secret, code, token or assertion.

The span is current while the endpoint runs, so a CIMD fetch or a Celery task it queues joins it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from functools import lru_cache
from typing import Any

from django.urls import Resolver404, resolve

from mcp_oauth.observability import tracing
from mcp_oauth.observability.tracing_oauth import BODY_LIMIT, Exchange

__all__ = ["OAUTH_URL_NAMES", "oauth_endpoint", "oauth_tracing_lane"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]

#: URL name (namespace ``oauth2_provider``) -> ``oauth.endpoint``.
OAUTH_URL_NAMES: dict[str, str] = {
    "token": "token",
    "authorize": "authorize",
    "dcr-register": "register",
    "dcr-register-management": "register",
    "revoke-token": "revoke",
    "introspect": "introspect",
    "oauth-server-metadata": "metadata",
    "oauth-resource-metadata": "metadata",
    "mcp-oauth-protected-resource": "metadata",
}


@lru_cache(maxsize=512)
def oauth_endpoint(path: str) -> tuple[str, str] | None:
    """``(oauth.endpoint, http.route)`` of ``path``, or None when it is no OAuth endpoint."""
    if not (path.startswith("/oauth/") or "/.well-known/" in path):
        return None
    try:
        match = resolve(path)
    except Resolver404:
        return None
    endpoint = OAUTH_URL_NAMES.get(match.url_name or "")
    if endpoint is None and "/.well-known/" in path:
        endpoint = "metadata"
    if endpoint is None:
        return None
    return endpoint, "/" + str(match.route).lstrip("^").rstrip("$")


def oauth_tracing_lane(app: ASGIApp) -> ASGIApp:
    """``app`` with a span around each request to an OAuth endpoint; ``app`` itself when tracing
    is off in this process."""
    if tracing.installed_runtime() is None:
        return app

    async def lane(
        scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        found = oauth_endpoint(path) if path else None
        runtime = tracing.installed_runtime()  # None again after tracing.uninstall()
        if found is None or runtime is None:
            await app(scope, receive, send)
            return
        exchange = Exchange(endpoint=found[0], method=scope.get("method", "GET"), route=found[1])
        for name, value in scope.get("headers") or ():
            exchange.take_request_header(name, value)

        async def tee_receive() -> Message:
            message = await receive()
            if message.get("type") == "http.request" and len(exchange.request_body) < BODY_LIMIT:
                exchange.request_body += bytes(message.get("body") or b"")[: BODY_LIMIT - len(exchange.request_body)]
            return message

        async def tee_send(message: Message) -> None:
            kind = message.get("type")
            if kind == "http.response.start":
                exchange.take_response_start(message["status"], message.get("headers") or ())
            elif kind == "http.response.body" and exchange.keeps_response_body():
                exchange.response_body += bytes(message.get("body") or b"")[: BODY_LIMIT - len(exchange.response_body)]
            await send(message)

        handle = runtime.begin_oauth_span(exchange)
        try:
            await app(scope, tee_receive, tee_send)
        finally:
            runtime.end_oauth_span(handle, exchange)

    lane.app = app  # type: ignore[attr-defined]  # the wrapped application, as ASGI middleware keeps it
    return lane
