"""The Streamable HTTP MCP endpoint (MCP 2025-11-25 and 2026-07-28 "Transports" / "Streamable HTTP").

The view speaks HTTP only: it authenticates, parses one JSON-RPC message, lets
:func:`~.routing.route_request` pick the era and run the checks (no HTTP framework there, so an
ASGI lane reuses it), runs the method's entry of :data:`~.methods.methods` (the only place a
method is routed), then renders JSON or SSE.

* **POST** one JSON-RPC message. Requests get ``application/json``; ``tools/call`` (and
  ``subscriptions/listen``) under ASGI switch to ``text/event-stream`` from the tool's first
  notification or server-to-client request on, or after ``SSE_KEEPALIVE_SECONDS`` of silence
  (both eras; MCP "Sending Messages to the Server": the server MUST answer a request with
  either content type, and the client MUST support both); a tool that sends nothing is
  answered with plain JSON. Notifications and
  responses get ``202 Accepted`` with no body.
* **GET** (2025-11-25 sessions) opens the session's SSE stream for server-initiated messages
  (the outbox), resumable with ``Last-Event-ID``. ASGI only; 405 under WSGI and for 2026-07-28.
* **DELETE** (2025-11-25 sessions) ends the session: 204, then 404 for its id; 405 for 2026-07-28.

Checks, in order (the first failing one answers):

=========================================================  ======  ==============
check                                                      status  JSON-RPC code
=========================================================  ======  ==============
POST/DELETE past the worker's in-flight bound (admission)  503     -32000
URL is not an enabled protected resource                   404     -32600
``Origin`` present and not allowed (DNS rebinding)         403     -32600
bearer token (missing, invalid, foreign, expired; scope)   401/403 (challenge)
the client over its rate limit (admission)                 429     -32029
GET/DELETE with a 2026-07-28 ``MCP-Protocol-Version``      405     (no body)
POST: ``Accept`` lacks ``application/json`` or             406     -32600
``text/event-stream``; GET: lacks ``text/event-stream``
POST: ``Content-Type`` not ``application/json``            415     -32600
POST: body larger than ``MAX_REQUEST_BYTES``               413     -32600
POST: not JSON                                             400     -32700
POST: not one JSON-RPC 2.0 message (batches too)           400     -32600
**2026-07-28 request** (:mod:`.modern` ladder):
``_meta`` envelope incomplete                              400     -32602
``MCP-Protocol-Version``/``Mcp-Method``/``Mcp-Name`` ≠     400     -32020
body
unsupported version (``data.supported``/``requested``)     400     -32022
method unknown in 2026-07-28                               404     -32601
client capability missing (``data.requiredCapabilities``)  400     -32021
``Mcp-Param-*`` ≠ an ``x-mcp-header`` tool argument         400     -32020
invalid params (incl. a bad ``requestState``)              400     -32602
**2025-11-25 request**:
method this server does not have in the handshake era      200     -32601
``MCP-Protocol-Version`` present but unsupported           400     -32022
no ``Mcp-Session-Id`` (all but ``initialize``)             400     -32600
unknown/ended/expired session, or another principal's      404     -32600
invalid params, unknown tool, invalid tool arguments       200     -32602
**both**: tool needs scopes the token lacks (step-up)      403     (challenge)
=========================================================  ======  ==============

The endpoint serves the tools of ``MCP_OAUTH["TOOL_REGISTRY"]``; a site with
several registries routes its own :class:`McpView` instances::

    path("tenant-a/mcp", McpView.as_view(registry=tenant_a_tools))

(the URL must be a :class:`~mcp_oauth.models.ProtectedResource` too).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import RequestDataTooBig
from django.core.handlers.asgi import ASGIRequest
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.utils.module_loading import import_string
from django.views.decorators.csrf import csrf_exempt

from mcp_oauth.mcp_server.transport import admission, wakeup
from mcp_oauth.mcp_server.transport.context import pending_requests
from mcp_oauth.mcp_server.transport.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    JsonRpcError,
    McpError,
    dumps,
    error_message,
    parse_message,
)
from mcp_oauth.mcp_server.transport.methods import methods
from mcp_oauth.mcp_server.transport.routing import (
    SESSION_HEADER,
    check_protocol_version,
    is_modern_header,
    require_session,
    route_request,
)
from mcp_oauth.mcp_server.transport.sessions import SESSION_ID_RE, end_session, session_cache_key
from mcp_oauth.mcp_server.transport.sse import OutboxCursor, ResponseChannel, outbox_stream
from mcp_oauth.mcp_server.transport.table import Call, InsufficientScope, Method
from mcp_oauth.mcp_server.transport.tool_methods import cancel_request, cancel_session_requests
from mcp_oauth.models import McpSession, ProtectedResource
from mcp_oauth.resource_server.authentication import (
    BearerChallenge,
    BearerPrincipal,
    PrincipalGone,
    authenticate_bearer_cached,
    invalid_token,
    principal_gone,
)
from mcp_oauth.resource_server.cache import resource_by_uri
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.cors import mcp_cors, origin_allowed
from mcp_oauth.shared.resource_uris import InvalidResource
from mcp_oauth.signals import client_response_received, mcp_session_ended

__all__ = ["McpView", "mcp_endpoint"]

logger = logging.getLogger("mcp_oauth.transport")

_EVENT_ID_RE = re.compile(r"^[0-9]{1,18}$")


def json_response(message: Any, status: int = 200) -> HttpResponse:
    response = HttpResponse(dumps(message), status=status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def error_response(exc: JsonRpcError) -> HttpResponse:
    return json_response(error_message(exc.request_id, exc), status=exc.http_status)


def _sse_response(stream) -> StreamingHttpResponse:
    response = StreamingHttpResponse(stream, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache, no-transform"
    response["X-Accel-Buffering"] = "no"
    return response


async def _no_events():
    return
    yield  # an async generator that yields nothing


def _media_ranges(request: HttpRequest) -> frozenset[str]:
    return _parse_accept(request.headers.get("Accept", ""))


@functools.lru_cache(maxsize=64)
def _parse_accept(header: str) -> frozenset[str]:
    """The media ranges of an ``Accept`` value (clients send the same few values: cached)."""
    return frozenset(part.split(";", 1)[0].strip().lower() for part in header.split(",") if part.strip())


@functools.lru_cache(maxsize=64)
def _accepts_json_and_sse(header: str) -> bool:
    ranges = _parse_accept(header)
    json_ok = bool(ranges & {"application/json", "application/*", "*/*"})
    sse_ok = bool(ranges & {"text/event-stream", "text/*", "*/*"})
    return json_ok and sse_ok


def accepts_json_and_sse(request: HttpRequest) -> bool:
    """POST ``Accept``: both ``application/json`` and ``text/event-stream`` (wildcards count)."""
    return _accepts_json_and_sse(request.headers.get("Accept", ""))


def accepts_sse(request: HttpRequest) -> bool:
    """GET ``Accept``: ``text/event-stream`` (wildcards count)."""
    return bool(_media_ranges(request) & {"text/event-stream", "text/*", "*/*"})


def is_asgi(request: HttpRequest) -> bool:
    """True when served by an ASGI server (the only case where responses can stream)."""
    return isinstance(request, ASGIRequest)


def _method_not_allowed_for_modern() -> HttpResponse:
    """MCP 2026-07-28 "Transports": no GET stream, no DELETE: 405 with ``Allow: POST``."""
    response = HttpResponse(status=405)
    response["Allow"] = "POST"
    return response


def read_body(request: HttpRequest) -> bytes:
    """The POST body, refusing more than ``MAX_REQUEST_BYTES`` (413) before parsing it."""
    limit = int(mcp_oauth_settings.MAX_REQUEST_BYTES)

    def too_large() -> JsonRpcError:
        return JsonRpcError(INVALID_REQUEST, f"Request body larger than {limit} bytes", http_status=413)

    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise too_large()
    try:
        body = request.body
    except RequestDataTooBig:
        raise too_large() from None
    if len(body) > limit:
        raise too_large()
    return body


async def _gone(principal: BearerPrincipal) -> bool:
    """:func:`~mcp_oauth.resource_server.authentication.principal_gone`, in a thread."""
    return await sync_to_async(principal_gone)(principal)


def _authorize(request: HttpRequest, origin_ok: bool) -> BearerPrincipal | HttpResponse:
    """Resolve the resource from the URL, check the Origin, authenticate (one thread hop)."""
    try:
        resource = resource_by_uri(mcp_oauth_settings.absolute(request.path))
    except (ProtectedResource.DoesNotExist, InvalidResource):
        return error_response(JsonRpcError(INVALID_REQUEST, "Not Found: no MCP endpoint at this URL", http_status=404))
    if not origin_ok:
        return error_response(JsonRpcError(INVALID_REQUEST, "Forbidden: Origin not allowed", http_status=403))
    try:
        return mcp_oauth_settings.adapter.authenticate_request(request, resource)
    except BearerChallenge as challenge:
        return challenge.response()


class McpView:
    """The MCP endpoint as a configurable object.

    :param registry: the :class:`~mcp_oauth.mcp_server.tools.ToolRegistry` to serve, or the
        dotted path of one; None: ``MCP_OAUTH["TOOL_REGISTRY"]``, read on every request.
    """

    def __init__(self, registry: Any = None) -> None:
        self._registry = registry

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Callable[..., Any]:
        """An async Django view (CSRF-exempt, with MCP CORS) serving ``cls(**initkwargs)``."""
        instance = cls(**initkwargs)

        async def view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            return await instance.dispatch(request)

        view.view_class = cls  # type: ignore[attr-defined]
        view.view_initkwargs = initkwargs  # type: ignore[attr-defined]
        return mcp_cors(csrf_exempt(view))

    @property
    def registry(self) -> Any:
        registry = self._registry
        if registry is None:  # resolved once by the settings object (IMPORT_STRINGS)
            return mcp_oauth_settings.TOOL_REGISTRY
        if isinstance(registry, str):  # as_view(registry="dotted.path"): imported once per view
            registry = self._registry = import_string(registry)
        return registry

    async def dispatch(self, request: HttpRequest) -> HttpResponseBase:
        """Admit (the in-flight bound, unless the ASGI lane counted the request already), authorize,
        rate-limit the client, then route by HTTP method; protocol errors become JSON-RPC error
        responses (:mod:`.admission` for the 503 and 429)."""
        scope = getattr(request, "scope", None)
        if request.method not in admission.COUNTED_METHODS or (
            scope is not None and admission.ADMITTED_SCOPE_KEY in scope
        ):
            return await self.admitted(request)
        ticket = admission.admit()
        if ticket is None:
            return admission.overloaded_response(
                admission.peek_id(request), origin=request.headers.get("Origin"), path=request.path
            )
        try:
            return await self.admitted(request)
        finally:
            ticket.leave()  # an event stream (returned, not yet sent) holds no place

    async def admitted(self, request: HttpRequest) -> HttpResponseBase:
        """:meth:`dispatch` once the request is admitted."""
        origin = request.headers.get("Origin")
        origin_ok = origin is None or origin_allowed(origin)
        prefetched: dict[str, Any] = {}
        session_id = (request.headers.get(SESSION_HEADER) or "").strip()
        also = [session_cache_key(session_id)] if SESSION_ID_RE.match(session_id) else []
        # A GET stream opens once and then lives for hours: its authorization and session lookup
        # take the thread path (an event-loop Redis read made every idle stream ~30 KB larger,
        # measured with bench/prod_topology.py --only idle).
        principal = (
            await authenticate_bearer_cached(request, mcp_oauth_settings.absolute(request.path), also, prefetched)
            if origin_ok and request.method != "GET"
            else None
        )
        if principal is None:  # anything not answered by the caches: the database, in a thread
            outcome = await sync_to_async(_authorize)(request, origin_ok)
            if isinstance(outcome, HttpResponse):
                return outcome
            principal = outcome
        limited = await admission.rate_limited(request, principal)
        if limited is not None:
            return limited
        method = request.method
        if method not in ("POST", "GET", "DELETE"):
            response = json_response(error_message(None, McpError(INVALID_REQUEST, "Method Not Allowed")), status=405)
            response["Allow"] = "GET, POST, DELETE" if is_asgi(request) else "POST, DELETE"
            return response
        try:
            if method == "POST":
                return await self.post(request, principal, prefetched)
            return await (self.get if method == "GET" else self.delete)(request, principal)
        except JsonRpcError as exc:
            if exc.http_status == 404 and await _gone(principal):  # its session went with its user
                return invalid_token(principal.resource).response()
            return error_response(exc)
        except IntegrityError:  # a row keyed to a user or client deleted since the token was checked
            if await _gone(principal):
                return invalid_token(principal.resource).response()
            raise
        except PrincipalGone:
            return invalid_token(principal.resource).response()

    # --- POST ----------------------------------------------------------------------------

    async def post(
        self, request: HttpRequest, principal: BearerPrincipal, prefetched: dict[str, Any] | None = None
    ) -> HttpResponseBase:
        if not accepts_json_and_sse(request):
            raise JsonRpcError(
                INVALID_REQUEST,
                "Not Acceptable: Accept must list application/json and text/event-stream",
                http_status=406,
            )
        if request.content_type != "application/json":
            raise JsonRpcError(
                INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json", http_status=415
            )
        incoming = parse_message(read_body(request))
        if incoming.kind == "request":
            entry, call = await route_request(
                incoming, request.headers, principal, self.registry, http_request=request, prefetched=prefetched
            )
            response = await self.run(request, entry, call)
            if call.method == "initialize" and call.session is not None and response.status_code == 200:
                response[SESSION_HEADER] = call.session.pk
            return response
        if is_modern_header(request.headers):
            # 2026-07-28: no client notification acts on anything (cancelling = closing the
            # stream), and there are no server-to-client requests to answer.
            if incoming.kind == "response":
                raise JsonRpcError(
                    INVALID_REQUEST, "Bad Request: no server-to-client request to answer", http_status=400
                )
            return HttpResponse(status=202)
        check_protocol_version(request.headers)
        session = await require_session(request.headers, principal, prefetched=prefetched)
        if incoming.kind == "notification":
            if incoming.method == "notifications/cancelled":
                cancel_request(session.pk, incoming.params.get("requestId"))
        elif not pending_requests.deliver(session.pk, incoming.raw):
            responses = await client_response_received.asend_robust(
                sender=McpSession, session=session, message=incoming.raw
            )
            for receiver, outcome in responses:
                if isinstance(outcome, Exception):
                    logger.error("client_response_received receiver %r failed", receiver, exc_info=outcome)
            await sync_to_async(wakeup.publish)(wakeup.answer_topic(session.pk))  # the asker may wait elsewhere
        return HttpResponse(status=202)

    async def run(self, request: HttpRequest, entry: Method, call: Call) -> HttpResponseBase:
        """Serve ``call`` with ``entry``: JSON, or SSE for a streaming method under ASGI."""
        if not (entry.streams and is_asgi(request)):
            try:
                message, status = await methods.serve(entry, call)
            except InsufficientScope as exc:
                return self.scope_challenge(call.principal, exc)
            return json_response(message, status)
        channel = ResponseChannel(
            event_ids=not call.modern,
            cancel_on_close=call.modern,
            close_on_drain=call.method == "subscriptions/listen",  # no final response to lose
        )
        call.sink = channel.send
        task = channel.start(methods.serve(entry, call))
        # Both eras: JSON when the handler finishes before sending anything; SSE from its first
        # notification or server-to-client request, or after SSE_KEEPALIVE_SECONDS of silence.
        window = float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS)
        try:
            first = await channel.first(window)
        except asyncio.CancelledError:
            # The client left before the response started: 2026-07-28 calls that cancellation;
            # a 2025-11-25 request finishes (disconnection is not cancellation there).
            if call.modern:
                task.cancel()
            raise
        if first is not None and first[0] == "done":
            task = first[1]
            failure = task.exception() if not task.cancelled() else None
            if isinstance(failure, InsufficientScope):
                return self.scope_challenge(call.principal, failure)
            if task.cancelled():
                # notifications/cancelled before anything was sent: no response for the request
                # (MCP "Cancellation"), so an event stream that ends without one.
                return _sse_response(_no_events())
            if isinstance(failure, PrincipalGone) or (
                isinstance(failure, IntegrityError) and await _gone(call.principal)
            ):
                return invalid_token(call.principal.resource).response()
            if failure is not None:
                logger.error("request %r failed", call.method, exc_info=failure)
                return json_response(error_message(call.message_id, McpError(INTERNAL_ERROR, "Internal error")), 500)
            message, status = task.result()
            return json_response(message, status)

        return _sse_response(channel.events(first, keepalive_seconds=float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS)))

    @staticmethod
    def scope_challenge(principal: BearerPrincipal, exc: InsufficientScope) -> HttpResponse:
        """403 ``insufficient_scope`` naming every scope the operation needs (MCP "Scope Challenge Handling")."""
        return BearerChallenge(
            principal.resource,
            status=403,
            error="insufficient_scope",
            error_description=str(exc),
            scopes=exc.required,
        ).response()

    # --- GET -----------------------------------------------------------------------------

    async def get(self, request: HttpRequest, principal: BearerPrincipal) -> HttpResponseBase:
        """Open the session's SSE stream (outbox), resuming after ``Last-Event-ID``."""
        if is_modern_header(request.headers):
            return _method_not_allowed_for_modern()
        if not is_asgi(request):
            response = json_response(
                error_message(None, McpError(INVALID_REQUEST, "Method Not Allowed: no SSE stream on this server")),
                status=405,
            )
            response["Allow"] = "POST, DELETE"
            return response
        if not accepts_sse(request):
            raise JsonRpcError(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream", http_status=406)
        check_protocol_version(request.headers)
        session = await require_session(request.headers, principal, cached=False)
        after = 0
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id is not None and last_event_id.strip():
            value = last_event_id.strip()
            if not _EVENT_ID_RE.match(value):
                raise JsonRpcError(
                    INVALID_REQUEST,
                    "Bad Request: Last-Event-ID does not name a resumable event of this session's stream",
                    http_status=400,
                )
            after = int(value)
        stream = outbox_stream(
            session.pk,
            after,
            poll_seconds=float(mcp_oauth_settings.SSE_POLL_INTERVAL_SECONDS),
            keepalive_seconds=float(mcp_oauth_settings.SSE_KEEPALIVE_SECONDS),
        )
        sse = _sse_response(stream)
        sse.outbox_cursor = OutboxCursor(session.pk, after)  # type: ignore[attr-defined]  # see stream_lane
        return sse

    # --- DELETE --------------------------------------------------------------------------

    async def delete(self, request: HttpRequest, principal: BearerPrincipal) -> HttpResponse:
        """End the session: 204; its id is unknown (404) from then on."""
        if is_modern_header(request.headers):
            return _method_not_allowed_for_modern()
        check_protocol_version(request.headers)
        session = await require_session(request.headers, principal)
        ended = await sync_to_async(end_session)(session)
        cancel_session_requests(session.pk)
        if ended:
            await mcp_session_ended.asend(sender=McpSession, session=session)
        return HttpResponse(status=204)


#: The default endpoint (``mcp_oauth.urls`` routes ``MCP_PATH`` to it).
mcp_endpoint = McpView.as_view()
