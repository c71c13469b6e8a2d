"""What a tool receives about its call: :class:`ToolContext` (MCP 2025-11-25 "Tools", "Progress", "Logging").

A tool declares a first parameter named ``ctx`` (or any parameter annotated
``ToolContext``) and gets the principal of the bearer token, its MCP session,
the Django request, and async helpers that send notifications to the client on
the response stream of the ``tools/call`` POST.

Notifications travel on that stream only while it exists: under ASGI the
endpoint answers ``tools/call`` with ``text/event-stream`` and the helpers
deliver; under WSGI (JSON responses) they are dropped silently
(:attr:`ToolContext.streaming` tells which). Messages that must reach the client
whatever happens go through the session outbox instead:
:func:`mcp_oauth.mcp_server.transport.sessions.enqueue_session_message`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from mcp_oauth.mcp_server.transport import wakeup
from mcp_oauth.mcp_server.transport.input_required import (
    CAPABILITY_OF,
    InputRequest,
    InputRound,
    as_input_request,
    check_input_keys,
    resolve_inputs,
)
from mcp_oauth.mcp_server.transport.jsonrpc import McpError
from mcp_oauth.mcp_server.transport.token_exchange import ExchangedToken, TokenExchangeError, exchanger

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_oauth.models import McpSession, ProtectedResource
    from mcp_oauth.resource_server.authentication import BearerPrincipal

logger = logging.getLogger("mcp_oauth.transport")

#: RFC 5424 severities in increasing order (MCP 2025-11-25 "Logging" ``LoggingLevel``).
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

#: A coroutine function that puts one JSON-RPC message on the open response stream.
MessageSink = Callable[[dict[str, Any]], Awaitable[None]]


class PendingRequests:
    """In-process waiters for the client's answers to server-to-client requests.

    ``ToolContext.send_request`` registers ``(session id, request id)`` here and
    awaits the future; the endpoint hands every JSON-RPC response the client
    POSTs to :meth:`deliver`. The answer must reach the process that asked (one
    ASGI process, or a load balancer that routes by ``Mcp-Session-Id``).
    """

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, Any], asyncio.Future] = {}

    def register(self, session_id: str, request_id: Any) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self._waiters[(session_id, request_id)] = future
        return future

    def discard(self, session_id: str, request_id: Any) -> None:
        self._waiters.pop((session_id, request_id), None)

    def deliver(self, session_id: str, message: dict[str, Any]) -> bool:
        """Resolve the waiter of ``message["id"]`` in ``session_id``; False when none waits here."""
        future = self._waiters.pop((session_id, message.get("id")), None)
        if future is None or future.done():
            return False
        future.get_loop().call_soon_threadsafe(_resolve, future, message)
        return True


def _resolve(future: asyncio.Future, message: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(message)


#: The process-wide :class:`PendingRequests`.
pending_requests = PendingRequests()


@dataclass
class ToolContext:
    """The call a tool is serving.

    Attributes: ``principal`` (:class:`~mcp_oauth.resource_server.authentication.BearerPrincipal`),
    ``session`` (:class:`~mcp_oauth.models.McpSession`; None in a 2026-07-28 request), ``request``
    (the front end's request object, a Django ``HttpRequest``), ``request_id`` (JSON-RPC id of
    ``tools/call``), ``protocol_version`` (negotiated, or the request's own in 2026-07-28),
    ``progress_token`` (from ``params._meta``, or None), ``tool_name``, ``era`` (``"legacy"``:
    a 2025-11-25-family session; ``"modern"``: a stateless 2026-07-28 request), ``arguments``
    (the validated arguments), ``input_round`` (modern: the multi-round-trip state of this call,
    :class:`~mcp_oauth.mcp_server.transport.input_required.InputRound`). Shortcuts: ``user`` (None for
    client-credentials tokens), ``application``, ``client_id``, ``scopes`` (frozenset granted to
    the token), ``resource`` (:class:`~mcp_oauth.models.ProtectedResource`),
    ``organization`` (the :class:`~mcp_oauth.models.Organization` the call acts for, or None),
    ``client_capabilities`` (declared at ``initialize``, or in this request's ``_meta``).

    Sync tools run in a worker thread; they call the async helpers through
    ``asgiref.sync.async_to_sync(ctx.log)("info", "…")``.
    """

    principal: BearerPrincipal
    session: McpSession | None
    request: HttpRequest
    request_id: int | str
    protocol_version: str
    tool_name: str = ""
    progress_token: int | str | None = None
    sink: MessageSink | None = field(default=None, repr=False)
    era: str = "legacy"
    declared_capabilities: dict[str, Any] | None = None
    meta_log_level: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    input_round: InputRound | None = field(default=None, repr=False)
    #: The task this call runs as (:class:`mcp_oauth.mcp_server.mcp_tasks.runner.TaskHandle`: ``task_id``,
    #: ``cancelled``, ``set_status_message``), or None outside a task.
    task: Any = field(default=None, repr=False)

    @property
    def modern(self) -> bool:
        """True in a stateless 2026-07-28 request (no session, no server-to-client requests)."""
        return self.era == "modern"

    @property
    def user(self) -> Any:
        return self.principal.user

    @property
    def application(self) -> Any:
        return self.principal.application

    @property
    def client_id(self) -> str | None:
        return self.principal.client_id

    @property
    def is_machine(self) -> bool:
        """True when the token speaks for the client itself (``client_credentials``), not for a user."""
        return self.principal.is_machine

    @property
    def scopes(self) -> frozenset[str]:
        return self.principal.scopes

    @property
    def resource(self) -> ProtectedResource:
        return self.principal.resource

    @property
    def organization(self) -> Any:
        """The :class:`~mcp_oauth.models.Organization` the call acts for: the endpoint's at a
        per-organization endpoint (``<MCP_PATH>/o/<slug>``), else the one the user chose for the
        token on the consent page, else None. Shared by the process's requests: do not modify it."""
        return self.principal.organization

    @property
    def actor(self) -> dict[str, Any] | None:
        """The RFC 8693 §4.1 ``act`` claim of the call's token, when it was issued by token exchange
        for another resource (``{"sub": "<client_id>", "act"?: {...}}``), else None. Loaded with the
        token: no query."""
        return self.principal.actor

    async def exchange_token(self, *, resource: str, scope: str | Iterable[str] | None = None) -> ExchangedToken:
        """Exchange the call's access token for one of another protected resource of this site
        (RFC 8693 token exchange, in process: no HTTP round trip to the token endpoint).

        The new token speaks for the same user and organization, for at most the call token's
        scopes and remaining lifetime, carries ``act = {"sub": <the calling client's id>}`` and has
        no refresh token. The site's adapter decides
        (:meth:`~mcp_oauth.adapter.DefaultMCPAdapter.token_exchange_decision`; refused by default).

        :param resource: the target protected resource's URI (RFC 8707), e.g. ``<site>/api``.
        :param scope: the scopes wanted (a space-separated string or an iterable), at most the
            call token's; None: the call token's scopes the resource serves.
        :returns: the :class:`~.token_exchange.ExchangedToken` (``authorization`` is the header value).
        :raises TokenExchangeError: the server's refusal (``error``: ``unauthorized_client``,
            ``invalid_target``, ``invalid_scope``, ``invalid_grant`` — a DPoP-bound call token
            cannot be exchanged in process: the server holds no proof of the client's key).
        """
        header = self.request.headers.get("Authorization", "") if self.request is not None else ""
        _scheme, _, subject_token = header.partition(" ")
        if not subject_token.strip():
            raise TokenExchangeError("invalid_request", "The call carries no access token.")
        function = exchanger()
        # released: the worker thread gives its database connection back to the pool afterwards
        return await sync_to_async(wakeup.released(function), thread_sensitive=False)(
            subject_token.strip(), resource, scope
        )

    @property
    def client_capabilities(self) -> dict[str, Any]:
        if self.declared_capabilities is not None:
            return dict(self.declared_capabilities)
        if self.session is None:
            return {}
        return dict(self.session.client_capabilities or {})

    @property
    def streaming(self) -> bool:
        """True when notifications reach the client (the response is an SSE stream)."""
        return self.sink is not None

    async def send_notification(self, method: str, params: dict[str, Any] | None = None) -> bool:
        """Send the notification ``method`` with ``params`` on this call's response stream.

        :returns: True when sent, False when dropped (JSON response mode).
        """
        if self.sink is None:
            return False
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.sink(message)
        return True

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """``notifications/progress`` for this call (MCP 2025-11-25 "Progress").

        Sent only when the request carried ``_meta.progressToken``.
        :returns: True when sent.
        """
        if self.progress_token is None:
            return False
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        return await self.send_notification("notifications/progress", params)

    async def log(self, level: str, data: Any, logger_name: str | None = None) -> bool:
        """``notifications/message`` (MCP 2025-11-25 "Logging"), if ``level`` reaches the session's level.

        :param level: one of :data:`LOG_LEVELS`.
        :param data: any JSON-serialisable value.
        :raises ValueError: unknown ``level``.
        :returns: True when sent.
        """
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if self.modern:
            # MCP 2026-07-28: only when this request's _meta carries a log level.
            minimum = self.meta_log_level
            if minimum is None:
                return False
        else:
            minimum = self.session.log_level if self.session is not None else None
        if minimum in LOG_LEVELS and LOG_LEVELS.index(level) < LOG_LEVELS.index(minimum):
            return False
        params: dict[str, Any] = {"level": level, "data": data}
        if logger_name:
            params["logger"] = logger_name
        return await self.send_notification("notifications/message", params)

    def can_request(self, method: str) -> bool:
        """True when the client declared the capability ``method`` (``elicitation/create``,
        ``sampling/createMessage``, ``roots/list``) needs: in this request's ``_meta`` (2026-07-28)
        or at ``initialize``."""
        needed = CAPABILITY_OF.get(method)
        return needed is None or isinstance(self.client_capabilities.get(needed), dict)

    async def request_inputs(
        self, requests: Mapping[str, InputRequest | Mapping[str, Any]], *, timeout: float | None = None
    ) -> dict[str, dict[str, Any]]:
        """Ask the client several things at once under keys the caller chooses, in either era, and
        return ``{key: result object}`` (``ElicitResult``, ``CreateMessageResult``, ``ListRootsResult``).

        2026-07-28 request: one ``input_required`` round asks every key not answered yet
        (:func:`~mcp_oauth.mcp_server.transport.input_required.resolve_inputs`); the body runs again on the
        retry and gets the answers (several calls in a row make a multi-round flow: keep keys
        unique within the body). 2025-11-25 session: one live server-to-client request per key,
        in order (:meth:`send_request`).

        :param requests: key (1-128 characters) -> :class:`InputRequest` (or ``{"method", "params"}``).
        :param timeout: 2025-11-25: seconds to wait for each answer.
        :raises ValueError: no requests, a bad key or an unknown method.
        :raises McpError: 2026-07-28: -32021 when the client did not declare a capability a request
            needs (``data.requiredCapabilities``); 2025-11-25: the client answered with an error.
        :raises InputRequired: 2026-07-28, not everything is answered yet.
        """
        check_input_keys(requests)
        asked = {key: as_input_request(value) for key, value in requests.items()}
        if not self.modern:
            return {
                key: await self.send_request(request.method, request.params, timeout=timeout)
                for key, request in asked.items()
            }
        if self.input_round is None:
            self.input_round = InputRound()
        return resolve_inputs(self.input_round, asked, self.client_capabilities)

    async def request_input(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Ask the client one thing (``elicitation/create``, ``sampling/createMessage``,
        ``roots/list``) in either era and return its ``result`` object: :meth:`request_inputs`
        under the next generated key (``input-1``, ``input-2``, … in the order the body asks).

        :raises McpError: 2026-07-28: -32021 when the client did not declare the capability the
            method needs (``data.requiredCapabilities``); 2025-11-25: the client answered with an error.
        :raises InputRequired: 2026-07-28, not answered yet.
        """
        if not self.modern:
            return await self.send_request(method, params, timeout=timeout)
        if self.input_round is None:
            self.input_round = InputRound()
        key = self.input_round.next_key()
        return (await self.request_inputs({key: InputRequest(method, params)}))[key]

    async def send_request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | None = None,
        request_id: str | None = None,
        poll: Callable[[], Awaitable[dict[str, Any] | None]] | None = None,
        poll_interval: float = 0.25,
    ) -> dict[str, Any]:
        """Send a server-to-client request (``elicitation/create``, ``sampling/createMessage``, ``ping``)
        on this call's response stream and wait for the client's answer.

        The client POSTs its answer to the endpoint, and it may reach another worker
        process. An answer that reaches this process resolves the wait at once; for the
        others, pass ``poll``: a coroutine function called every ``poll_interval`` seconds
        that returns the answer message once it has been stored elsewhere (a receiver of
        :data:`mcp_oauth.signals.client_response_received` stores it), else None.

        :param request_id: the JSON-RPC id to use (unique in the session); default ``"srv-<random>"``.
        :returns: the ``result`` object of the client's response.
        :raises McpError: the client answered with a JSON-RPC error (its code and message).
        :raises RuntimeError: not streaming (JSON response mode: the client cannot be asked).
        :raises TimeoutError: no answer within ``timeout`` seconds.
        """
        if self.modern or self.session is None:
            raise RuntimeError("a 2026-07-28 request cannot carry server-to-client requests (use input_required)")
        if self.sink is None:
            raise RuntimeError("server-to-client requests need a streaming (ASGI) tools/call response")
        request_id = request_id or "srv-" + secrets.token_urlsafe(12)
        future = pending_requests.register(self.session.pk, request_id)
        try:
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if params is not None:
                message["params"] = params
            await self.sink(message)
            answer = await _wait_answer(future, timeout, poll, poll_interval, self.session.pk)
        finally:
            pending_requests.discard(self.session.pk, request_id)
        if "error" in answer:
            error = answer["error"] if isinstance(answer["error"], dict) else {}
            raise McpError(error.get("code", 0), str(error.get("message", "")), error.get("data"))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}


async def _wait_answer(
    future: asyncio.Future,
    timeout: float | None,
    poll: Callable[[], Awaitable[dict[str, Any] | None]] | None,
    poll_interval: float,
    session_id: str = "",
) -> dict[str, Any]:
    if poll is None:
        return await asyncio.wait_for(future, timeout)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    poll_interval = wakeup.answer_poll_interval(poll_interval)
    while True:
        step = poll_interval if deadline is None else min(poll_interval, deadline - loop.time())
        if step <= 0:
            raise TimeoutError
        if await wakeup.wait_for_answer(future, session_id, step):
            return future.result()
        answer = await poll()
        if answer is not None:
            return answer
