"""Request throttling for the OAuth endpoints, counted in the Django cache.

Scopes and default rates (``MCP_OAUTH["THROTTLE_RATES"]``, per caller, see :func:`caller_key`):

==============  =================  ==============================================================
scope           default            endpoint and answer when over the limit (HTTP 429, ``Retry-After``)
==============  =================  ==============================================================
``register``    ``30/hour``        ``POST /oauth/register`` (RFC 7591): JSON ``{"error": "slow_down", …}``
``authorize``   ``60/minute``      ``/oauth/authorize`` (GET and the consent POST): the error page with
                                   ``temporarily_unavailable`` (RFC 6749 §4.1.2.1) for a browser
                                   (``Accept: text/html``), else the same as JSON; never a redirect
``token``       ``120/minute``     ``POST /oauth/token``: JSON ``{"error": "slow_down", …}`` (the token
                                   endpoint's rate-limit error, RFC 8628 §3.5)
``elicitation`` ``60/minute``      the ``elicitation`` app's pages (URL-mode start page, third-party
                                   callback, secure input, connections): its error page, status 429
``client_auth_  ``30/minute``      failed confidential-client authentications per caller *and* client
failure``                          (:mod:`mcp_oauth.authorization_server.client_auth.client_secrets`): then that caller gets 429
                                   ``slow_down`` for that client, without hashing, until the window
                                   ends; other callers of the same client are not affected
==============  =================  ==============================================================

A rate is ``"<count>/<period>"`` with period ``second``, ``minute``, ``hour`` or ``day`` (or
their first letter); ``None`` switches a scope off. A site's ``THROTTLE_RATES`` dict is merged
over the defaults, so ``{"token": None}`` only turns the token endpoint's limit off.

Counting uses fixed windows aligned on the period (one cache counter per caller, scope and
window, created with ``add`` and increased with ``incr``, both atomic in Redis and
memcached), so a caller gets at most ``count`` requests per window and up to twice that
across a window boundary. ``Retry-After`` (RFC 9110 §10.2.3, in seconds) is the time left
in the window. HTTP 429 is RFC 6585 §4. With several server processes use a shared cache
(``THROTTLE_CACHE``); a per-process cache multiplies the limits by the process count.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from collections.abc import Callable

from django.core.cache import caches
from django.core.checks import Error
from django.http import HttpRequest, HttpResponse

from mcp_oauth.errors import OAuthError
from mcp_oauth.settings import DEFAULTS, mcp_oauth_settings
from mcp_oauth.signals import request_shed

PERIODS = {"s": 1, "second": 1, "m": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_RATE_RE = re.compile(r"^\s*(\d+)\s*/\s*([a-z]+)\s*$", re.IGNORECASE)
CACHE_PREFIX = "mcp_oauth:throttle:"

log = logging.getLogger(__name__)


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """``"60/minute"`` → ``(60, 60)``: (requests allowed, window in seconds); ``None`` → ``None`` (no limit).

    :raises ValueError: a malformed rate (e.g. ``"ten per minute"``, ``"5/fortnight"``).
    """
    if rate is None:
        return None
    match = _RATE_RE.match(str(rate))
    if not match or match.group(2).lower() not in PERIODS:
        raise ValueError(f"Invalid throttle rate {rate!r}; use '<count>/<second|minute|hour|day>'.")
    return int(match.group(1)), PERIODS[match.group(2).lower()]


def configured_rates() -> dict[str, str | None]:
    """``THROTTLE_RATES`` merged over the default rates."""
    return {**DEFAULTS["THROTTLE_RATES"], **(mcp_oauth_settings.THROTTLE_RATES or {})}


def rate_for(scope: str) -> tuple[int, int] | None:
    """The parsed rate of ``scope``; ``None`` when it is switched off.

    A malformed rate is logged and leaves the scope unthrottled (``manage.py check`` reports it
    as ``mcp_oauth.E032``), so a configuration mistake never turns requests into errors.
    """
    try:
        return parse_rate(configured_rates().get(scope))
    except ValueError as exc:
        log.error("MCP_OAUTH['THROTTLE_RATES'][%r]: %s Not throttling it.", scope, exc)
        return None


def check_settings() -> list:
    """System-check messages: ``mcp_oauth.E032`` for each malformed ``THROTTLE_RATES`` entry."""
    messages = []
    for scope, rate in configured_rates().items():
        try:
            parse_rate(rate)
        except ValueError as exc:
            messages.append(Error(f'MCP_OAUTH["THROTTLE_RATES"]["{scope}"]: {exc}', id="mcp_oauth.E032"))
    return messages


def caller_key(request: HttpRequest, scope: str) -> str:
    """Who is calling: ``THROTTLE_KEY_FUNCTION(request, scope)`` when set, else ``REMOTE_ADDR``."""
    function: Callable[[HttpRequest, str], str] | None = mcp_oauth_settings.THROTTLE_KEY_FUNCTION
    if function:
        return str(function(request, scope))
    return request.META.get("REMOTE_ADDR") or "unknown"


def check(request: HttpRequest, scope: str, discriminator: str = "") -> int | None:
    """Count this request against ``scope``; return ``None`` when allowed, else the seconds to wait.

    The returned value (≥ 1) is what goes into ``Retry-After``. A ``discriminator`` splits the
    caller's allowance further (e.g. per registered client software: one budget per caller and value).
    A refusal sends :data:`mcp_oauth.signals.request_shed` with ``reason="throttled"``.
    """
    rate = rate_for(scope)
    if rate is None:
        return None
    limit, period = rate
    now = time.time()
    window = int(now // period)
    caller = caller_key(request, scope) + (f"\x00{discriminator}" if discriminator else "")
    ident = hashlib.sha256(caller.encode("utf-8", "replace")).hexdigest()[:32]
    key = f"{CACHE_PREFIX}{scope}:{ident}:{window}"
    cache = caches[mcp_oauth_settings.THROTTLE_CACHE]
    timeout = period + 1
    cache.add(key, 0, timeout)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add() and incr()
        cache.set(key, 1, timeout)
        count = 1
    if count <= limit:
        return None
    _announce(request)  # every caller answers it 429 (throttle_error)
    return max(1, math.ceil((window + 1) * period - now))


def _failure_key(scope: str, ident: str, period: int) -> str:
    window = int(time.time() // period)
    return f"{CACHE_PREFIX}{scope}:{hashlib.sha256(ident.encode()).hexdigest()[:32]}:{window}"


def exhausted_for(scope: str, ident: str) -> int | None:
    """Seconds until ``ident`` may try again when it already used up ``scope``'s allowance in the
    current window, else ``None`` (counts nothing).

    For limits on *failures* (``client_auth_failure``): check first, then :func:`count_failure`
    only when the attempt failed. A cache outage counts as not exhausted.
    """
    rate = rate_for(scope)
    if rate is None:
        return None
    limit, period = rate
    now = time.time()
    try:
        count = int(caches[mcp_oauth_settings.THROTTLE_CACHE].get(_failure_key(scope, ident, period)) or 0)
    except Exception as exc:  # noqa: BLE001 - the cache backend's own errors: never refuse for them
        log.warning("throttle cache unavailable: %s", exc)
        return None
    if count < limit:
        return None
    return max(1, math.ceil((int(now // period) + 1) * period - now))


def is_exhausted(scope: str, ident: str) -> bool:
    """Whether ``ident`` already used up ``scope``'s allowance in the current window (see :func:`exhausted_for`)."""
    return exhausted_for(scope, ident) is not None


def count_failure(scope: str, ident: str) -> None:
    """Count one failure of ``ident`` against ``scope`` (see :func:`is_exhausted`)."""
    rate = rate_for(scope)
    if rate is None:
        return
    _, period = rate
    key = _failure_key(scope, ident, period)
    cache = caches[mcp_oauth_settings.THROTTLE_CACHE]
    try:
        cache.add(key, 0, period + 1)
        try:
            cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, period + 1)
    except Exception as exc:  # noqa: BLE001
        log.warning("throttle cache unavailable: %s", exc)


def throttle_error(retry_after: int, error: str = "slow_down") -> OAuthError:
    """The :class:`~mcp_oauth.errors.OAuthError` of a caller over its rate: HTTP 429 with ``Retry-After``."""
    return OAuthError(
        error, f"Too many requests; retry after {retry_after} seconds.", status=429, retry_after=retry_after
    )


def json_response(retry_after: int, error: str = "slow_down") -> HttpResponse:
    """HTTP 429 with ``Retry-After`` and an OAuth-style JSON body (rendered by :mod:`mcp_oauth.errors`)."""
    return throttle_error(retry_after, error).response()


def enforce(request: HttpRequest, scope: str, *, error: str = "slow_down") -> None:
    """:func:`check`; over the limit, raise the 429 :class:`~mcp_oauth.errors.OAuthError`.

    :raises OAuthError: ``error`` (``slow_down`` by default), status 429, ``Retry-After``.
    """
    retry_after = check(request, scope)
    if retry_after is not None:
        raise throttle_error(retry_after, error)


def throttled(request: HttpRequest, scope: str, *, error: str = "slow_down") -> HttpResponse | None:
    """:func:`check` and, when over the limit, the JSON 429 answer; ``None`` when the request may go on."""
    retry_after = check(request, scope)
    if retry_after is None:
        return None
    return json_response(retry_after, error)


def _announce(request: HttpRequest) -> None:
    """Send :data:`mcp_oauth.signals.request_shed` (``reason="throttled"``) for a request answered 429."""
    request_shed.send(sender=None, reason="throttled", client_id=None, path=request.path)
