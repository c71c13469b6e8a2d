"""The token lane: the OAuth token endpoint served under ASGI in one thread hop.

The token endpoint is synchronous (DOT, oauthlib, the ORM). Under Django's ASGI handler every
request crosses the middleware stack in async mode: each ``MiddlewareMixin`` runs its
``process_request`` / ``process_response`` through ``sync_to_async`` (13 thread hops with the
reference site's middleware), and ``request_started`` / ``response.close()`` add two more.
For a grant that is about half of the CPU it costs.

:func:`token_lane` wraps a site's ASGI application. Requests to the token endpoint (the path of
the URL named ``oauth2_provider:token``, found once through the site's URLconf) are served by
the **same** Django handler, with the **same** ``MIDDLEWARE`` and URLconf, loaded in *sync*
mode: request start, the whole middleware chain, the view and the response's ``close()``
(``request_finished``: the database connection goes back to the pool) run in one call on one
thread, taken from the MCP lane's pool of request threads
(:class:`mcp_oauth.transport.asgi.RequestThread`). Answers are those of the Django stack by
construction: security headers, CORS, throttling (``token`` and ``client_auth_failure``),
overload 503 + ``Retry-After`` (:class:`mcp_oauth.overload.OverloadMiddleware`), OAuth errors.
Every other path and every non-HTTP scope goes to the wrapped application unchanged::

    # asgi.py
    from django.core.asgi import get_asgi_application
    from mcp_oauth.authorization_server.asgi import token_lane

    application = token_lane(get_asgi_application())

A site that keeps its own ``asgi.py`` unchanged (or runs WSGI) serves the token endpoint
through its URLconf as before, only with more thread hops.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import HttpResponseBase
from django.urls import NoReverseMatch, reverse, set_script_prefix

from ..transport.asgi import RequestThread, http_path

__all__ = ["TokenLane", "token_lane"]

logger = logging.getLogger("mcp_oauth.authorization_server")

#: URL names of the endpoints the lane serves (those DOT and the app register in ``oauth2_provider``).
LANE_URL_NAMES = ("oauth2_provider:token",)


class TokenLane(ASGIHandler):
    """ASGI application: the token endpoint through Django's sync handler in one hop, the rest by ``app``."""

    def __init__(self, app: Any, url_names: tuple[str, ...] = LANE_URL_NAMES) -> None:
        # No super().__init__(): the middleware is loaded in sync mode on first use.
        self.app = app
        self.url_names = url_names
        self._paths: frozenset[str] | None = None
        self._middleware_loaded = False

    @property
    def paths(self) -> frozenset[str]:
        """The paths served by the lane (without the script prefix); empty when none is routed."""
        if self._paths is None:
            paths = set()
            for name in self.url_names:
                try:
                    paths.add(reverse(name))
                except NoReverseMatch:
                    logger.info("token lane: no URL named %s; served by the wrapped application", name)
            self._paths = frozenset(paths)
        return self._paths

    def serves(self, scope: dict[str, Any]) -> bool:
        path = http_path(scope)
        return path is not None and path in self.paths

    def _load(self) -> None:
        if not self._middleware_loaded:
            self.load_middleware(is_async=False)
            self._middleware_loaded = True

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not self.serves(scope):
            return await self.app(scope, receive, send)
        self._load()
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        thread = RequestThread()
        try:
            async with ThreadSensitiveContext(executor=thread):
                response = await sync_to_async(self._serve, thread_sensitive=True)(scope, body_file)
        finally:
            thread.release()
            body_file.close()
        await self.send_response(response, send)
        if response.streaming:  # not closed on the request's thread (see _serve)
            await sync_to_async(response.close)()

    def _serve(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """On the request's thread: what Django's handler does for one request, sync mode."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        response = self.get_response(request) if request is not None else error_response
        assert response is not None  # create_request gives a request or an error response
        if not response.streaming:
            # request_finished (connections back to the pool) before the bytes go out: the
            # response is complete in memory, and the thread is released right after.
            response.close()
        return response


def token_lane(app: Any) -> TokenLane:
    """Wrap a site's ASGI application so that the token endpoint runs in one thread hop."""
    return TokenLane(app)
