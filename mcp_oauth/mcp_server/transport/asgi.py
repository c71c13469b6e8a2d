"""The lean ASGI lane of the MCP endpoint: routed before Django's handler, same view and table.

Under Django's ASGI handler every request crosses the whole middleware stack, and each
``MiddlewareMixin`` runs its ``process_request``/``process_response`` through
``sync_to_async``: with the reference site's seven middleware that is 13 thread hops per
request, plus the ``request_started`` signal's. None of it serves a bearer-token JSON-RPC
endpoint (no cookies, sessions, CSRF, messages or frames). :func:`mcp_lane` wraps the site's
ASGI application and serves ``MCP_OAUTH["MCP_PATH"]`` itself: it reads the body, builds the
same ``ASGIRequest``, calls the same view (:data:`~mcp_oauth.mcp_server.transport.views.mcp_endpoint`,
with its CORS and the one method -> handler table behind it), sends the response, then closes
it (``request_finished``: the database connection goes back to the pool). Every other path,
and every non-HTTP scope, goes to the wrapped application unchanged::

    # asgi.py
    from django.core.asgi import get_asgi_application
    from mcp_oauth.mcp_server.transport.asgi import mcp_lane

    application = mcp_lane(get_asgi_application())

**Threads.** A POST's thread is taken from a small pool of single-thread executors on its first
sync call (:class:`RequestThread`), not created per request, and goes back when the response is
closed on it. A request that runs no sync code at all (bearer token, resource and session from
the caches, an async tool: :func:`~mcp_oauth.resource_server.authentication.authenticate_bearer_cached`,
:func:`~mcp_oauth.mcp_server.transport.sessions.afind_session`) takes no thread and makes no thread hop: it
opened no database connection, so its response is closed (``request_finished``) on the event loop,
without Django's receivers that clean up a thread's state (:func:`close_on_loop`).

**Admission.** A ``POST`` or ``DELETE`` counts against the worker's in-flight bound
(``MCP_MAX_IN_FLIGHT``, :mod:`~mcp_oauth.mcp_server.transport.admission`) from the moment its path is
known, before its body is read; past the bound it is answered at once (:meth:`McpLane.shed`: 503,
``Retry-After``, JSON-RPC -32000) from raw ASGI messages. Its place is given back when the view
returned a response that streams, or once the response is sent.

A site that keeps its own ``asgi.py`` unchanged still serves the endpoint through its URLconf
(``mcp_oauth.urls``), only slower.

What the lane keeps from Django's handler: one ``ThreadSensitiveContext`` per POST/DELETE
request (sync tools and ORM calls run on the request's own thread; a GET stream's short sync
steps share the process's thread-sensitive thread, so an idle stream parks no thread), disconnect detection (a client leaving
an SSE stream cancels the response), ``set_script_prefix``, the security headers of
``SecurityMiddleware`` that apply to an API (``X-Content-Type-Options``, ``Referrer-Policy``,
``Cross-Origin-Opener-Policy``), and overload answers: a database or cache that is exhausted or
away gives 503 + ``Retry-After`` (:mod:`mcp_oauth.shared.overload`), any other failure a JSON-RPC
-32603 with HTTP 500 (logged), never a dropped connection.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, ASGIRequest, get_script_prefix
from django.http import HttpResponse
from django.urls import set_script_prefix

from mcp_oauth.mcp_server.transport.security_headers import add_security_headers
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.lanes import (  # the lane's plumbing, shared with the token lane
    CALL_THREADS,
    RequestThread,
    ScopeHeaders,
    _threads,
    call_on_request_thread,
    close_on_loop,
    http_path,
)
from mcp_oauth.shared.organization_paths import is_organization_endpoint_path
from mcp_oauth.shared.overload import is_unavailable_error, unavailable_response

__all__ = [
    "CALL_THREADS",
    "McpLane",
    "RequestThread",
    "ScopeHeaders",
    "_threads",
    "call_on_request_thread",
    "close_on_loop",
    "http_path",
    "mcp_lane",
]

logger = logging.getLogger("mcp_oauth.transport")

#: Seconds a POST's response may take before the lane starts listening for the client's
#: disconnect (:meth:`McpLane._respond_watched`); answers quicker than this need no listener task.
WATCH_DISCONNECT_AFTER = 0.05


class McpLane(ASGIHandler):
    """ASGI application: the MCP endpoint served directly, everything else by ``app``."""

    def __init__(self, app: Any, view: Any = None) -> None:
        # No super().__init__(): the lane loads no middleware.
        self.app = app
        self._view = view
        self._serve_get: Any = None
        self._admission: Any = None

    def _load_endpoint(self) -> None:
        # The one deferred import: a site's asgi.py imports this module before Django's app
        # loading, and the view and the stream lane import the models.
        from mcp_oauth.mcp_server.transport import admission, stream_lane, views

        self._admission = admission
        if self._view is None:
            self._view = views.mcp_endpoint
        self._serve_get = stream_lane.serve_get

    @property
    def view(self) -> Any:
        """:data:`.views.mcp_endpoint` (unless another view was given), imported on first use."""
        if self._view is None:
            self._load_endpoint()
        return self._view

    @property
    def serve_get(self) -> Any:
        """:func:`.stream_lane.serve_get`, imported on first use."""
        if self._serve_get is None:
            self._load_endpoint()
        return self._serve_get

    @property
    def admission(self) -> Any:
        """:mod:`.admission` (the in-flight bound), imported on first use."""
        if self._admission is None:
            self._load_endpoint()
        return self._admission

    def serves(self, scope: dict[str, Any]) -> bool:
        path = http_path(scope)
        if path is None:
            return False
        mcp_path = str(mcp_oauth_settings.MCP_PATH).rstrip("/")
        if path in (mcp_path, mcp_path + "/"):
            return True
        # An organization's own endpoint, <MCP_PATH>/o/<slug> (organization_endpoints.py).
        return path.startswith(mcp_path + "/o/") and is_organization_endpoint_path(path)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if not self.serves(scope):
            return await self.app(scope, receive, send)
        if scope.get("method") == "GET":
            # A GET stream lives for hours and is idle nearly all the time: its few short sync
            # steps (authorization, session lookup, outbox reads on a wake-up) share the
            # process's one thread-sensitive thread instead of parking a thread per stream, and
            # between events it keeps only a small state object (stream_lane.py).
            await self.serve_get(self, scope, receive, send)
            return
        ticket = None
        admission = self.admission
        if scope.get("method") in admission.COUNTED_METHODS:
            # The in-flight bound (admission.py), before any other work: past it, a fast 503.
            ticket = admission.admit()
            if ticket is None:
                await self.shed(scope, receive, send)
                return
            scope[admission.ADMITTED_SCOPE_KEY] = ticket
            send = _leaving_on_last_body(send, ticket)
        thread = RequestThread()
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send, thread)
        finally:
            thread.release()
            if ticket is not None:
                ticket.leave()

    async def shed(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Answer a request past the in-flight bound: 503, ``Retry-After``, JSON-RPC -32000 with
        the request's id when its body is small enough to read (:data:`.admission.ID_PEEK_BYTES`).
        Raw ASGI messages: no request or response object (a shed request must cost next to nothing)."""
        admission = self.admission
        request_id = None
        origin = None
        declared = None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                declared = value
            elif name == b"origin":
                origin = value.decode("latin1")
        if declared is not None and declared.isdigit() and int(declared) <= admission.ID_PEEK_BYTES:
            body = b""
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                if not message.get("more_body") or len(body) > admission.ID_PEEK_BYTES:
                    break
            request_id = admission.request_id_of(body)
        headers, content = admission.overloaded_asgi(request_id, origin=origin, path=scope.get("path", ""))
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any, thread: RequestThread | None = None) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        try:
            request = ASGIRequest(scope, body_file)
        except UnicodeDecodeError:
            body_file.close()
            await self.send_response(HttpResponse(status=400), send)
            return
        request.__dict__["headers"] = ScopeHeaders(scope.get("headers", ()))  # HttpRequest.headers, cached
        try:
            response = await self._respond_watched(request, receive, send)
        except asyncio.CancelledError:
            # Cancelled from outside (server shutdown): the request still gives its database
            # connections back (request_finished on the thread that holds them).
            body_file.close()
            if thread is not None and thread.used:
                await sync_to_async(signals.request_finished.send)(sender=self.__class__)
            raise
        if response is not None:
            # request_finished's sender, as Django's handler sets it
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if thread is not None and not thread.used:
                # No sync code ran for this request: it holds no database connection (those
                # live on sync threads), so request_finished runs on the loop without the
                # receivers that clean up a thread's state (_LoopFinished).
                await close_on_loop(response)
            else:
                await sync_to_async(response.close)()  # request_finished: connections back to the pool
        else:
            await signals.request_finished.asend(sender=self.__class__)
        body_file.close()

    async def _respond_watched(self, request: ASGIRequest, receive: Any, send: Any) -> HttpResponse | None:
        """:meth:`_respond` in this task, cancelled when the client disconnects; None then.

        Django's handler runs the response as a second task next to a disconnect listener and
        waits for the first of the two. Here the response runs in the request's own task and the
        listener (``listen_for_disconnect``: one ``receive()``) starts only once the response has
        taken :data:`WATCH_DISCONNECT_AFTER` seconds: most calls are answered before that and
        create no task at all. A client that left earlier is noticed then (a long handler is
        cancelled :data:`WATCH_DISCONNECT_AFTER` seconds late at most), or by the response's
        own write.
        """
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        listener: asyncio.Task | None = None
        left = False

        def on_disconnect(done: asyncio.Task) -> None:
            nonlocal left
            if not done.cancelled() and isinstance(done.exception(), RequestAborted):
                left = True
                task.cancel()

        def watch() -> None:
            nonlocal listener
            listener = loop.create_task(self.listen_for_disconnect(receive))
            listener.add_done_callback(on_disconnect)

        timer = loop.call_later(WATCH_DISCONNECT_AFTER, watch)
        try:
            response = await self._respond(request, send)
            if left:  # the cancellation landed in the response's write, which ends quietly on it
                task.uncancel()
            return response
        except asyncio.CancelledError:
            if not left or task.uncancel() > 0:
                raise  # cancelled from outside (server shutdown), not (only) by the client leaving
            return None
        finally:
            timer.cancel()
            if listener is not None:
                listener.remove_done_callback(on_disconnect)
                if not listener.done():
                    listener.cancel()
                    try:
                        await listener
                    except (asyncio.CancelledError, RequestAborted):
                        pass
                elif not listener.cancelled():
                    listener.exception()  # retrieved: RequestAborted is the expected outcome

    async def _respond(self, request: ASGIRequest, send: Any) -> HttpResponse:
        try:
            response = await self.view(request)
            if response.streaming:  # an event stream from now on: it no longer holds the in-flight bound
                ticket = request.scope.get(self.admission.ADMITTED_SCOPE_KEY)
                if ticket is not None:
                    ticket.leave()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure gets a defined answer
            if is_unavailable_error(exc):
                logger.warning("answering 503: %s: %s", type(exc).__name__, exc)
                response = unavailable_response()
            else:
                logger.error("MCP endpoint failed", exc_info=exc)
                response = HttpResponse(
                    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}',
                    status=500,
                    content_type="application/json",
                )
        add_security_headers(response)
        if not response.streaming and "Content-Length" not in response.headers:
            # Known length: the server frames the body with it instead of chunked encoding
            # (one write less per response).
            response.headers["Content-Length"] = str(len(response.content))
        try:
            await self.send_response(response, send)
        except asyncio.CancelledError:
            pass  # the client left during the response
        return response


def mcp_lane(app: Any) -> McpLane:
    """Wrap a site's ASGI application so that the MCP endpoint skips Django's middleware stack."""
    return McpLane(app)


def _leaving_on_last_body(send: Any, ticket: Any) -> Any:
    """``send`` that gives ``ticket``'s place back just before the response's last body message:
    a keep-alive client's next request may arrive before this request's task has finished, and
    must not find its own previous request still counted (a spurious 503 at the bound)."""

    async def send_and_leave(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            ticket.leave()
        await send(message)

    return send_and_leave
