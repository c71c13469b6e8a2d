"""The token lane: the OAuth token endpoint served under ASGI before Django's middleware stack.

Under Django's ASGI handler every request crosses the site's whole middleware stack, and each
``MiddlewareMixin`` runs its ``process_request`` / ``process_response`` through
``sync_to_async`` (13 thread hops with the reference site's middleware). Sessions, CSRF,
authentication, messages and static files concern pages, not a form-encoded endpoint that
authenticates clients itself. :func:`token_lane` wraps a site's ASGI application and serves the
token endpoint (the path of the URL named ``oauth2_provider:token``, found once through the
site's URLconf) itself, in **one thread hop**, on a thread of the MCP lane's pool of request
threads (:func:`mcp_oauth.shared.lanes.call_on_request_thread`). On that thread it does what Django's handler
does for one request: ``set_script_prefix``, ``request_started``, the same ``ASGIRequest``, the
**same view** the URLconf routes to (resolved once: with its CORS, its form guards, throttling
and the OAuth errors), then ``response.close()`` (``request_finished``: the database connection
goes back to the pool) before the bytes go out.

Of the site's ``MIDDLEWARE`` the lane applies those that concern an API response, when the site
lists them (same classes, same settings): ``SecurityMiddleware`` (HTTPS redirect, HSTS,
``X-Content-Type-Options``, ``Referrer-Policy``, ``Cross-Origin-Opener-Policy``),
``CommonMiddleware`` (``ALLOWED_HOSTS``, ``DISALLOWED_USER_AGENTS``) and
``XFrameOptionsMiddleware``. Failures get Django's answers (:func:`response_for_exception`: 400
for a disallowed host, 500 logged), except that a database or cache that is exhausted or away
answers 503 + ``Retry-After`` (:mod:`mcp_oauth.shared.overload`), as ``OverloadMiddleware`` would.
Every other path and every non-HTTP scope goes to the wrapped application unchanged::

    # asgi.py
    from django.core.asgi import get_asgi_application
    from mcp_oauth.authorization_server.asgi import token_lane

    application = token_lane(get_asgi_application())

A site whose own middleware must see token requests leaves the lane out: without it (or under
WSGI) the token endpoint is served through its URLconf as before, by the same view, only slower.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, ASGIRequest, get_script_prefix
from django.core.handlers.exception import response_for_exception
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.http.response import HttpResponseBase
from django.urls import NoReverseMatch, get_resolver, reverse, set_script_prefix
from django.utils.module_loading import import_string

from mcp_oauth.shared.lanes import call_on_request_thread, http_path
from mcp_oauth.shared.overload import is_unavailable_error, unavailable_response

__all__ = ["API_MIDDLEWARE", "TokenLane", "token_lane"]

logger = logging.getLogger("mcp_oauth.authorization_server")

#: URL names of the endpoints the lane serves (those DOT and the app register in ``oauth2_provider``).
LANE_URL_NAMES = ("oauth2_provider:token",)

#: The middleware of Django that the lane applies when the site's ``MIDDLEWARE`` lists it, in the
#: site's order: what concerns an API response (see the module docstring).
API_MIDDLEWARE = frozenset(
    {
        "django.middleware.security.SecurityMiddleware",
        "django.middleware.common.CommonMiddleware",
        "django.middleware.clickjacking.XFrameOptionsMiddleware",
    }
)


def _no_response(request: HttpRequest) -> HttpResponseBase:  # pragma: no cover - never called
    raise AssertionError("the lane calls process_request/process_response only")


class TokenLane(ASGIHandler):
    """ASGI application: the token endpoint served in one thread hop, everything else by ``app``."""

    def __init__(self, app: Any, url_names: tuple[str, ...] = LANE_URL_NAMES) -> None:
        # No super().__init__(): the site's middleware chain is not loaded.
        self.app = app
        self.url_names = url_names
        self._views: dict[str, Callable[..., HttpResponseBase]] | None = None
        self._middleware: list[Any] | None = None

    @property
    def views(self) -> dict[str, Callable[..., HttpResponseBase]]:
        """``path -> view`` of the endpoints the lane serves (paths without the script prefix)."""
        if self._views is None:
            views = {}
            resolver = get_resolver()
            for name in self.url_names:
                try:
                    path = reverse(name)
                except NoReverseMatch:
                    logger.info("token lane: no URL named %s; served by the wrapped application", name)
                    continue
                views[path] = resolver.resolve(path).func
            self._views = views
        return self._views

    @property
    def paths(self) -> frozenset[str]:
        """The paths served by the lane (without the script prefix); empty when none is routed."""
        return frozenset(self.views)

    @property
    def middleware(self) -> list[Any]:
        """Instances of the site's :data:`API_MIDDLEWARE`, in ``MIDDLEWARE`` order."""
        if self._middleware is None:
            self._middleware = [
                import_string(path)(_no_response) for path in settings.MIDDLEWARE if path in API_MIDDLEWARE
            ]
        return self._middleware

    def serves(self, scope: dict[str, Any]) -> bool:
        path = http_path(scope)
        return path is not None and path in self.views

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = http_path(scope)
        view = self.views.get(path) if path is not None else None
        if view is None:
            return await self.app(scope, receive, send)
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            response = await call_on_request_thread(self._serve, view, scope, body_file)
        finally:
            body_file.close()
        await self.send_response(response, send)
        if response.streaming:  # not closed on the request's thread (see _serve)
            await sync_to_async(response.close)()

    async def read_body(self, receive: Any) -> Any:
        """Django's ``read_body``, keeping at most one byte more than ``DATA_UPLOAD_MAX_MEMORY_SIZE``:
        the rest of a larger body is read and dropped, and the view answers 413 from what was kept
        (Django compares the stored size with the limit). A client's upload fills no disk."""
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        if limit is None:
            return await super().read_body(receive)
        body_file = tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE, mode="w+b")
        kept = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                body_file.close()
                raise RequestAborted()
            chunk = message.get("body", b"")
            if chunk and kept <= limit:
                chunk = chunk[: limit + 1 - kept]
                body_file.write(chunk)
                kept += len(chunk)
            if not message.get("more_body", False):
                break
        body_file.seek(0)
        return body_file

    def _serve(self, view: Callable[..., HttpResponseBase], scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """On the request's thread: one request, as Django's handler would serve it (see the module docstring)."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        try:
            request = ASGIRequest(scope, body_file)
        except UnicodeDecodeError:
            response: HttpResponseBase = HttpResponseBadRequest()
        else:
            response = self._respond(view, request)
        if isinstance(response, HttpResponse):
            if not response.has_header("Content-Length"):
                # Known length: the server frames the body with it instead of chunked encoding.
                response.headers["Content-Length"] = str(len(response.content))
            # request_finished (connections back to the pool) before the bytes go out: the
            # response is complete in memory, and the thread is released right after.
            response.close()
        return response

    def _respond(self, view: Callable[..., HttpResponseBase], request: HttpRequest) -> HttpResponseBase:
        """Middleware and view as Django's chain runs them: a middleware's ``process_request`` may
        answer; an exception becomes a response where it happened, and the ``process_response``
        of every middleware around that point still runs on it."""
        entered = []
        response = None
        try:
            for instance in self.middleware:
                if hasattr(instance, "process_request"):
                    response = instance.process_request(request)
                entered.append(instance)
                if response is not None:
                    break
            else:
                response = view(request)
        except Exception as exc:  # noqa: BLE001 - every failure gets a defined answer
            response = self._failure(request, exc)
        for instance in reversed(entered):
            if hasattr(instance, "process_response"):
                try:
                    response = instance.process_response(request, response)
                except Exception as exc:  # noqa: BLE001
                    response = self._failure(request, exc)
        assert response is not None
        return response

    @staticmethod
    def _failure(request: HttpRequest, exc: Exception) -> HttpResponseBase:
        """503 + ``Retry-After`` when the database or cache is exhausted or away, else Django's answer."""
        if is_unavailable_error(exc):
            logger.warning("answering 503: %s: %s", type(exc).__name__, exc)
            return unavailable_response()
        return response_for_exception(request, exc)


def token_lane(app: Any) -> TokenLane:
    """Wrap a site's ASGI application so that the token endpoint skips the site's middleware stack."""
    return TokenLane(app)
