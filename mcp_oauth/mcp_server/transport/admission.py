"""Admission to the MCP endpoint: a bound on requests in flight per worker, per-client rate limits.

**In-flight bound** (``MCP_OAUTH["MCP_MAX_IN_FLIGHT"]``; ``None``: no bound). Each worker process
counts the MCP requests it is working on (:data:`in_flight`). One past the bound is answered at
once, before any authentication or database work::

    HTTP/1.1 503 Service Unavailable
    Retry-After: <MCP_SHED_RETRY_AFTER_SECONDS>
    Content-Type: application/json
    Cache-Control: no-store

    {"jsonrpc": "2.0", "id": <the request's id, or null>, "error": {"code": -32000,
     "message": "Server overloaded", "data": {"reason": "in_flight", "retryAfter": <seconds>}}}

``id`` is the request's when the body could be read and parsed cheaply (a body of at most
:data:`ID_PEEK_BYTES`), else ``null`` (JSON-RPC 2.0 §5). :data:`mcp_oauth.signals.request_shed`
is sent with ``reason="in_flight"``. 503 + ``Retry-After`` is RFC 9110 §15.6.4 / §10.2.3; -32000
lies in the JSON-RPC 2.0 range reserved for implementation-defined server errors.

Where it is counted: in :class:`~mcp_oauth.mcp_server.transport.asgi.McpLane` as soon as the
path is known to be the MCP endpoint (before the body is read), and in
:meth:`~mcp_oauth.mcp_server.transport.views.McpView.dispatch` for a site that serves the
endpoint through Django's handler or WSGI (not counted twice: the lane marks its ASGI scope).
Counted: ``POST`` and ``DELETE``, from arrival until the view returned its response; a response
that is an event stream (a ``tools/call`` that switched to SSE, ``subscriptions/listen``) stops
counting once the stream starts, so long-lived streams never hold the bound. Not counted: ``GET``
(the 2025-11-25 listen stream, idle for hours, bounded by its own small state:
:mod:`~mcp_oauth.mcp_server.transport.stream_lane`), CORS preflights, the health probes
(:mod:`mcp_oauth.health` answers them before the MCP lane) and every other path.

**Per-client rate limit** (``MCP_OAUTH["MCP_RATE_LIMIT"]``: ``{"rate": <requests per second>,
"burst": <requests>}``; ``None``: off; :meth:`~mcp_oauth.adapter.DefaultMCPAdapter.mcp_rate_limit`
overrides it per client). After authentication (the client is known) every MCP request of a
client takes a token from its bucket (:mod:`mcp_oauth.shared.rate_limit`: Redis, one round trip,
shared by the workers; in-process buckets with another cache). An empty bucket answers
``429`` with ``Retry-After`` (whole seconds until the bucket has a token again) and the same body
with ``{"code": -32029, "message": "Rate limit exceeded", "data": {"reason": "rate_limit",
"retryAfter": …}}``, and :data:`~mcp_oauth.signals.request_shed` with ``reason="rate_limit"``.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from django.conf import settings
from django.core.checks import Error
from django.http import HttpRequest, HttpResponse

from mcp_oauth.mcp_server.transport.jsonrpc import is_valid_id, strict_loads
from mcp_oauth.mcp_server.transport.security_headers import add_security_headers
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.cors import EXPOSE_HEADERS, origin_allowed
from mcp_oauth.shared.rate_limit import RateLimit, retry_after_seconds, take
from mcp_oauth.signals import request_shed

__all__ = [
    "ADMITTED_SCOPE_KEY",
    "ID_PEEK_BYTES",
    "RATE_LIMITED",
    "SERVER_OVERLOADED",
    "InFlight",
    "Ticket",
    "admit",
    "check_settings",
    "in_flight",
    "overloaded_asgi",
    "overloaded_response",
    "peek_id",
    "rate_limit_for",
    "rate_limited",
    "rate_limited_response",
    "request_id_of",
]

#: JSON-RPC code of the 503 answered past the in-flight bound (implementation-defined server error).
SERVER_OVERLOADED = -32000
#: JSON-RPC code of the 429 answered to a client over its rate limit.
RATE_LIMITED = -32029

#: The ASGI scope key the lane sets on a request it admitted (the view then does not count it again).
ADMITTED_SCOPE_KEY = "mcp_oauth.admitted"

#: A refused request's body is parsed for its ``id`` only up to this size (bytes); larger: ``null``.
ID_PEEK_BYTES = 65_536

#: Methods counted against the bound (GET streams and CORS preflights are not).
COUNTED_METHODS = frozenset({"POST", "DELETE"})


class InFlight:
    """A worker's count of MCP requests in flight, against ``MCP_MAX_IN_FLIGHT`` (read per call)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()  # WSGI and sync callers run on several threads

    def enter(self) -> bool:
        """Count one more request and return True, or False (nothing counted) at the bound."""
        bound = mcp_oauth_settings.MCP_MAX_IN_FLIGHT
        with self._lock:
            if bound is not None and self.count >= bound:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        with self._lock:
            self.count -= 1

    def full(self) -> bool:
        """Whether one more request would be refused now (nothing counted)."""
        bound = mcp_oauth_settings.MCP_MAX_IN_FLIGHT
        return bound is not None and self.count >= bound


#: This process's count.
in_flight = InFlight()


class Ticket:
    """One admitted request: :meth:`leave` gives its place back (once; later calls do nothing)."""

    __slots__ = ("_counter", "held")

    def __init__(self, counter: InFlight) -> None:
        self._counter = counter
        self.held = True

    def leave(self) -> None:
        if self.held:
            self.held = False
            self._counter.leave()


def admit(counter: InFlight | None = None) -> Ticket | None:
    """A :class:`Ticket` for one more request in flight, or None past the bound."""
    counter = counter or in_flight
    return Ticket(counter) if counter.enter() else None


def request_id_of(body: bytes) -> Any:
    """The ``id`` of a JSON-RPC request body, when it is small, parses as the endpoint parses it
    (:func:`~.jsonrpc.strict_loads`: a repeated ``id``, a body that is not UTF-8 or holds ``NaN`` is
    a parse error there, answered with a null id) and has a valid id; else None."""
    if not body or len(body) > ID_PEEK_BYTES:
        return None
    try:
        message = strict_loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    request_id = message["id"]
    return request_id if is_valid_id(request_id) else None


def peek_id(request: HttpRequest) -> Any:
    """:func:`request_id_of` the body of a Django request (None when it is too large or unreadable)."""
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    if declared > ID_PEEK_BYTES:
        return None
    try:
        return request_id_of(request.body)
    except Exception:  # noqa: BLE001 - RequestDataTooBig, a client that left: no id to echo
        return None


def _refusal(
    status: int, code: int, message: str, reason: str, retry_after: int, request_id: Any, origin: str | None
) -> HttpResponse:
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"reason": reason, "retryAfter": retry_after}},
    }
    response = HttpResponse(json.dumps(body, separators=(",", ":")), status=status, content_type="application/json")
    response["Retry-After"] = str(retry_after)
    response["Cache-Control"] = "no-store"
    if origin and origin_allowed(origin):  # a browser client may read the answer (as mcp_cors would add)
        response["Access-Control-Allow-Origin"] = origin
        response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
        response["Vary"] = "Origin"
    return response


_UNSET = object()
_asgi_template: tuple[Any, list[tuple[bytes, bytes]]] = (_UNSET, [])


def _overloaded_headers() -> list[tuple[bytes, bytes]]:
    """The fixed headers of the lane's 503 (built through an ``HttpResponse`` once per
    ``Retry-After`` value and settings change, as :func:`overloaded_response` sets them)."""
    global _asgi_template
    retry_after = int(mcp_oauth_settings.MCP_SHED_RETRY_AFTER_SECONDS)
    key = (
        retry_after,
        getattr(settings, "SECURE_CONTENT_TYPE_NOSNIFF", True),
        getattr(settings, "SECURE_REFERRER_POLICY", None),
    )
    if _asgi_template[0] != key:
        response = _refusal(503, SERVER_OVERLOADED, "Server overloaded", "in_flight", retry_after, None, None)
        add_security_headers(response)
        headers = [(name.encode("latin1"), value.encode("latin1")) for name, value in response.items()]
        _asgi_template = (key, headers)
    return _asgi_template[1]


def overloaded_asgi(
    request_id: Any = None, *, origin: str | None = None, path: str = ""
) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """:func:`overloaded_response` as ASGI response headers and body, for the lane: the same
    answer without building a response object (a shed request must cost next to nothing)."""
    request_shed.send(sender=None, reason="in_flight", client_id=None, path=path)
    retry_after = int(mcp_oauth_settings.MCP_SHED_RETRY_AFTER_SECONDS)
    body = (
        b'{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"Server overloaded",'
        b'"data":{"reason":"in_flight","retryAfter":%d}}}'
        % (json.dumps(request_id).encode(), SERVER_OVERLOADED, retry_after)
    )
    headers = [*_overloaded_headers(), (b"content-length", str(len(body)).encode())]
    if origin and origin_allowed(origin):
        headers += [
            (b"access-control-allow-origin", origin.encode("latin1")),
            (b"access-control-expose-headers", EXPOSE_HEADERS.encode()),
            (b"vary", b"Origin"),
        ]
    return headers, body


def overloaded_response(request_id: Any = None, *, origin: str | None = None, path: str = "") -> HttpResponse:
    """The 503 of a request past the in-flight bound (and the ``request_shed`` signal, ``in_flight``)."""
    request_shed.send(sender=None, reason="in_flight", client_id=None, path=path)
    retry_after = int(mcp_oauth_settings.MCP_SHED_RETRY_AFTER_SECONDS)
    return _refusal(503, SERVER_OVERLOADED, "Server overloaded", "in_flight", retry_after, request_id, origin)


def rate_limited_response(
    retry_after: int, request_id: Any = None, *, client_id: str | None = None, origin: str | None = None, path: str = ""
) -> HttpResponse:
    """The 429 of a client over its rate limit (and the ``request_shed`` signal, ``rate_limit``)."""
    request_shed.send(sender=None, reason="rate_limit", client_id=client_id, path=path)
    return _refusal(429, RATE_LIMITED, "Rate limit exceeded", "rate_limit", retry_after, request_id, origin)


def check_settings() -> list[Error]:
    """System-check messages: ``mcp_oauth.E098`` for ``MCP_MAX_IN_FLIGHT`` (None or an integer ≥ 0),
    ``MCP_SHED_RETRY_AFTER_SECONDS`` (an integer ≥ 1) or ``MCP_RATE_LIMIT`` (see :meth:`RateLimit.parse`)."""
    problems = []
    bound = mcp_oauth_settings.MCP_MAX_IN_FLIGHT
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
        problems.append('MCP_OAUTH["MCP_MAX_IN_FLIGHT"] must be None or an integer of at least 0.')
    retry = mcp_oauth_settings.MCP_SHED_RETRY_AFTER_SECONDS
    if isinstance(retry, bool) or not isinstance(retry, int) or retry < 1:
        problems.append('MCP_OAUTH["MCP_SHED_RETRY_AFTER_SECONDS"] must be an integer of at least 1.')
    try:
        RateLimit.parse(mcp_oauth_settings.MCP_RATE_LIMIT)
    except ValueError as exc:
        problems.append(f'MCP_OAUTH["MCP_RATE_LIMIT"]: {exc}')
    return [Error(problem, id="mcp_oauth.E098") for problem in problems]


def rate_limit_for(principal: Any) -> RateLimit | None:
    """The bucket of ``principal``'s client (:meth:`~mcp_oauth.adapter.DefaultMCPAdapter.mcp_rate_limit`)."""
    return RateLimit.parse(mcp_oauth_settings.adapter.mcp_rate_limit(principal))


async def rate_limited(request: HttpRequest, principal: Any) -> HttpResponse | None:
    """Take a token of ``principal``'s client bucket: None when the request may go on, else the 429.

    Costs nothing when no limit applies (``MCP_RATE_LIMIT`` None and no adapter override), one
    Redis round trip otherwise. A principal without a client (never for a bearer token) is not limited.
    """
    client_id = getattr(principal, "client_id", None)
    if client_id is None:
        return None
    limit = rate_limit_for(principal)
    if limit is None:
        return None
    wait = await take(mcp_oauth_settings.THROTTLE_CACHE, client_id, limit)
    if wait is None:
        return None
    return rate_limited_response(
        retry_after_seconds(wait),
        peek_id(request),
        client_id=client_id,
        origin=request.headers.get("Origin"),
        path=request.path,
    )
