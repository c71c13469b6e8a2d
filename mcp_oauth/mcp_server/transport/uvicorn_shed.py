"""The in-flight bound's refusal answered by the HTTP server's own protocol, for uvicorn workers.

Under an overload most requests are refused, so what a refusal costs decides how much CPU is left
for the requests admitted. Through the ASGI lane (:meth:`.asgi.McpLane.shed`) a refusal still
costs uvicorn its ASGI scope, a task, the request/response cycle object, the receive and send
messages and the application's chain of lanes. :class:`SheddingHttpToolsProtocol` is uvicorn's
``httptools`` protocol that answers a request past the bound from its parser callbacks instead:
when the headers of a ``POST`` or ``DELETE`` to ``MCP_PATH`` are parsed and this worker's
:data:`.admission.in_flight` count is at ``MCP_MAX_IN_FLIGHT``, it creates no task, keeps the body
(at most :data:`.admission.ID_PEEK_BYTES`, to echo the ``id``) and, once the request is complete,
writes the same answer as the lane (:func:`.admission.overloaded_asgi`: 503, ``Retry-After``, the
JSON-RPC -32000 body, the CORS headers of an allowed ``Origin``, the ``request_shed`` signal and
so the metrics) with uvicorn's default headers (``server``, ``date``), then keeps the connection
alive as uvicorn does.

Every other request, and a refusal the protocol cannot answer in order, goes the usual way (the
lane still sheds it): a request behind an unfinished response on the same connection (pipelining),
a connection whose client does not read its answers (the transport's write buffer is past its
high-water mark: uvicorn's path then stops reading it),
``Expect: 100-continue``, an upgrade, a percent-encoded path, a ``root_path``, or a site with the
JSON request log on (``REQUEST_LOG_ENABLED``: its lane logs every request, refusals included).

Used by :class:`UvicornWorker` (gunicorn ``-k mcp_oauth.mcp_server.transport.uvicorn_shed.UvicornWorker``;
the reference site's ``make serve``), or ``uvicorn --http
mcp_oauth.mcp_server.transport.uvicorn_shed:SheddingHttpToolsProtocol``. Needs ``httptools``
(``uvicorn[standard]``).
"""

from __future__ import annotations

from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn_worker import UvicornWorker as _UvicornWorker

from mcp_oauth.mcp_server.transport import admission
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["SheddingHttpToolsProtocol", "UvicornWorker"]

_STATUS_LINE = b"HTTP/1.1 503 Service Unavailable\r\n"
_COUNTED = frozenset(method.encode() for method in admission.COUNTED_METHODS)

#: States of a request the protocol refuses itself: its body is kept (to read the id) or ignored.
_KEEP, _IGNORE = 1, 2


class SheddingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``httptools`` protocol answering a request past the in-flight bound itself (see
    the module docstring)."""

    _shed: int = 0
    _shed_body: bytes = b""
    _shed_origin: str | None = None
    _shed_path: str = ""
    _shed_keep_alive: bool = True

    def on_message_begin(self) -> None:
        # A response written from a parser callback arms the keep-alive timer; a request following
        # it in the same read must not be cut by it.
        self._unset_keepalive_if_required()
        self._shed = 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        if self._refusable():
            self._refuse_begin()
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._shed:
            if self._shed == _KEEP:
                self._shed_body += body
                if len(self._shed_body) > admission.ID_PEEK_BYTES:  # more than declared: no id
                    self._shed, self._shed_body = _IGNORE, b""
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._shed:
            super().on_message_complete()
            return
        state, body = self._shed, self._shed_body
        self._shed, self._shed_body = 0, b""
        if state == _KEEP:
            self._refuse(admission.request_id_of(body))
        self._after_response()

    # -- the refusal -----------------------------------------------------------------------
    def _refusable(self) -> bool:
        """Whether this request is one to refuse here: past the bound, for the MCP path, and
        answerable in order on this connection."""
        if not admission.in_flight.full() or self.parser.get_method() not in _COUNTED:
            return False
        if self.pipeline or (self.cycle is not None and not self.cycle.response_complete):
            return False  # a response before it is not written yet: the lane keeps the order
        if self.flow.write_paused:
            # The client is not reading its answers: uvicorn's own path stops reading its requests
            # (backpressure) instead of piling refusals up in the write buffer.
            return False
        if self.expect_100_continue or self.root_path or self.parser.should_upgrade():
            return False
        if mcp_oauth_settings.REQUEST_LOG_ENABLED:
            return False  # the request log's lane logs every request
        path = httptools.parse_url(self.url).path
        if b"%" in path:
            return False
        mcp_path = str(mcp_oauth_settings.MCP_PATH).rstrip("/").encode()
        if path != mcp_path and path != mcp_path + b"/":
            return False
        self._shed_path = path.decode("ascii")
        return True

    def _refuse_begin(self) -> None:
        declared = None
        origin = None
        for name, value in self.headers:
            if name == b"content-length":
                declared = value
            elif name == b"origin":
                origin = value.decode("latin1")
        self._shed_origin = origin
        self._shed_keep_alive = self.parser.get_http_version() != "1.0" and self.parser.should_keep_alive()
        self._shed_body = b""
        if declared is not None and declared.isdigit() and int(declared) <= admission.ID_PEEK_BYTES:
            self._shed = _KEEP  # answered once the body is complete, with its id
        else:
            self._shed = _IGNORE  # answered now, id null; the body is read and dropped
            self._refuse(None)

    def _refuse(self, request_id: Any) -> None:
        headers, content = admission.overloaded_asgi(request_id, origin=self._shed_origin, path=self._shed_path)
        parts = [_STATUS_LINE]
        for name, value in (*self.server_state.default_headers, *headers):
            parts += (name, b": ", value, b"\r\n")
        if not self._shed_keep_alive:
            parts.append(b"connection: close\r\n")
        parts += (b"\r\n", content)
        self.transport.write(b"".join(parts))
        self.server_state.total_requests += 1

    def _after_response(self) -> None:
        """What uvicorn does once a response is complete: close, or arm the keep-alive timer."""
        if self.transport.is_closing():
            return
        if not self._shed_keep_alive:
            self.transport.close()
            return
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive, self.timeout_keep_alive_handler)


class UvicornWorker(_UvicornWorker):
    """The gunicorn worker of ``uvicorn_worker`` serving with :class:`SheddingHttpToolsProtocol`."""

    CONFIG_KWARGS = {**_UvicornWorker.CONFIG_KWARGS, "http": SheddingHttpToolsProtocol}
