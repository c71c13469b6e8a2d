"""Defined answers under overload: HTTP 503 with ``Retry-After`` instead of a 500.

When a request cannot be served because a shared resource is exhausted or away —
the database connection pool is empty past its ``timeout`` (``psycopg_pool.PoolTimeout``,
raised by Django as :class:`django.db.OperationalError`), PostgreSQL refuses connections
(``too many clients``), a query runs past ``statement_timeout`` (``QueryCanceled``), or the
Redis cache is unreachable — the client gets::

    HTTP/1.1 503 Service Unavailable
    Retry-After: <OVERLOAD_RETRY_AFTER_SECONDS>
    Content-Type: application/json
    Cache-Control: no-store

    (the OAuth error body: error temporarily_unavailable, with an error_description)

``temporarily_unavailable`` is the OAuth error code for this case (RFC 6749 §4.1.2.1);
503 + ``Retry-After`` is RFC 9110 §15.6.4 / §10.2.3. Rate limits stay 429 (:mod:`mcp_oauth.shared.throttling`).

Wiring: put :class:`OverloadMiddleware` first in ``MIDDLEWARE``. It answers exceptions of
views directly (``process_exception``) and turns the 500 that Django renders for an exception
raised anywhere else in the middleware chain into the 503 (a ``got_request_exception``
receiver marks the request), with or without ``DEBUG``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse

from mcp_oauth.errors import OAuthError
from mcp_oauth.settings import mcp_oauth_settings

try:
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ImportError:  # redis-py not installed (an optional dependency): no Redis cache to fail
    _CACHE_ERRORS: tuple[type[BaseException], ...] = ()
else:
    _CACHE_ERRORS = (RedisConnectionError, RedisTimeoutError)

__all__ = ["OverloadMiddleware", "is_unavailable_error", "unavailable_response"]

logger = logging.getLogger("mcp_oauth.overload")

_MARK = "_mcp_oauth_unavailable"


#: Exceptions that mean "a shared resource is exhausted or away", not "this request is wrong".
UNAVAILABLE_ERRORS: tuple[type[BaseException], ...] = (OperationalError, InterfaceError, *_CACHE_ERRORS)


def is_unavailable_error(exc: BaseException | None) -> bool:
    """True for a pool timeout, a refused/lost database connection, a cancelled (timed-out)
    statement or an unreachable Redis: errors that a retry later may not hit."""
    while exc is not None:
        if isinstance(exc, UNAVAILABLE_ERRORS):
            return True
        exc = exc.__cause__
    return False


def unavailable_response(description: str = "The service is overloaded; retry later.") -> HttpResponse:
    """HTTP 503, ``Retry-After`` (``MCP_OAUTH["OVERLOAD_RETRY_AFTER_SECONDS"]``), OAuth-style JSON body
    (rendered by :func:`mcp_oauth.errors.render_oauth_error`)."""
    return OAuthError(
        "temporarily_unavailable",
        description,
        status=503,
        retry_after=int(mcp_oauth_settings.OVERLOAD_RETRY_AFTER_SECONDS),
    ).response()


def _mark_request(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    """``got_request_exception`` receiver: remember that this request failed for lack of capacity."""
    exc = sys.exc_info()[1]
    if request is not None and is_unavailable_error(exc):
        setattr(request, _MARK, True)
        logger.warning("answering 503: %s: %s", type(exc).__name__, exc)


got_request_exception.connect(_mark_request, dispatch_uid="mcp_oauth.shared.overload.mark_request")


class OverloadMiddleware:
    """503 + ``Retry-After`` for requests that failed because the database or cache is unavailable.

    Sync and async capable (no thread hop under ASGI). Put it first in ``MIDDLEWARE``.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        return self._finish(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        return self._finish(request, await self.get_response(request))

    @staticmethod
    def _finish(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if getattr(request, _MARK, False) and response.status_code >= 500:
            return unavailable_response()
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if is_unavailable_error(exception):
            logger.warning("answering 503: %s: %s", type(exception).__name__, exception)
            return unavailable_response()
        return None
