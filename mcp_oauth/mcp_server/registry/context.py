"""What resource readers, prompt renderers and completers receive: :class:`RequestContext`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mcp_oauth.mcp_server.transport.input_required import (
    CAPABILITY_OF,
    InputRequest,
    InputRound,
    as_input_request,
    check_input_keys,
    resolve_inputs,
)

if TYPE_CHECKING:
    from django.http import HttpRequest

    from mcp_oauth.models import McpSession, ProtectedResource
    from mcp_oauth.resource_server.authentication import BearerPrincipal

__all__ = ["RequestContext"]


@dataclass(frozen=True)
class RequestContext:
    """The request being served, in the same terms a tool's ``ToolContext`` uses.

    Attributes: ``user`` (None for client-credentials tokens), ``scopes`` (frozenset
    granted to the token), ``resource`` (:class:`~mcp_oauth.models.ProtectedResource`),
    ``client_id``, ``principal`` (the
    :class:`~mcp_oauth.resource_server.authentication.BearerPrincipal`, None when the
    context was built for a notification rather than a request), ``request`` (the
    Django ``HttpRequest``, or None), ``session`` (the 2025-11-25
    :class:`~mcp_oauth.models.McpSession`, None on a stateless 2026-07-28 request),
    ``protocol_version``, ``method`` (the JSON-RPC method) and ``arguments`` (for a
    completer: the values of earlier arguments from ``context.arguments``; for a
    template reader: the matched URI variables as strings), ``era`` (``"legacy"`` or
    ``"modern"``), ``client_capabilities`` (this request's ``_meta`` or the session's),
    ``input_round`` (2026-07-28 ``prompts/get`` / ``resources/read``: the multi-round-trip
    state) and ``requester`` (2025-11-25 ``prompts/get`` / ``resources/read`` on a streamed
    response: sends a live server-to-client request, ``async (method, params, timeout) -> result``).

    Prompt renderers and resource readers ask the client with :meth:`request_inputs`, as tools do.
    """

    user: Any
    scopes: frozenset[str] = frozenset()
    resource: ProtectedResource | None = None
    client_id: str | None = None
    principal: BearerPrincipal | None = None
    request: HttpRequest | None = None
    session: McpSession | None = None
    protocol_version: str = ""
    method: str = ""
    arguments: dict[str, str] = field(default_factory=dict)
    era: str = "legacy"
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    input_round: InputRound | None = field(default=None, repr=False, compare=False)
    requester: Callable[[str, dict[str, Any] | None, float | None], Awaitable[dict[str, Any]]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def organization(self) -> Any:
        """The :class:`~mcp_oauth.models.Organization` the request acts for, or None (as
        ``ToolContext.organization``)."""
        return getattr(self.principal, "organization", None)

    @classmethod
    def for_principal(
        cls,
        principal: BearerPrincipal,
        *,
        request: HttpRequest | None = None,
        session: McpSession | None = None,
        protocol_version: str = "",
        method: str = "",
        era: str = "legacy",
        client_capabilities: dict[str, Any] | None = None,
        input_round: InputRound | None = None,
        requester: Callable[[str, dict[str, Any] | None, float | None], Awaitable[dict[str, Any]]] | None = None,
    ) -> RequestContext:
        """The context of a request authenticated as ``principal``."""
        return cls(
            user=principal.user,
            scopes=frozenset(principal.scopes),
            resource=principal.resource,
            client_id=principal.client_id,
            principal=principal,
            request=request,
            session=session,
            protocol_version=protocol_version,
            method=method,
            era=era,
            client_capabilities=dict(client_capabilities or {}),
            input_round=input_round,
            requester=requester,
        )

    @classmethod
    def for_call(cls, call: Any, **extra: Any) -> RequestContext:
        """The context of the MCP request ``call`` (the transport's ``Call``: its principal, HTTP
        request, session, protocol version, method, era and client capabilities); ``extra`` as
        :meth:`for_principal` (``input_round``, ``requester``)."""
        return cls.for_principal(
            call.principal,
            request=call.http_request,
            session=call.session,
            protocol_version=call.protocol_version,
            method=call.method,
            era=call.era,
            client_capabilities=call.client_capabilities,
            **extra,
        )

    @classmethod
    def for_session(cls, session: McpSession) -> RequestContext:
        """The context used to decide whether a notification may reach ``session``'s user.

        Scopes are unknown outside a request (empty): sources that filter on
        ``ctx.user`` work; ones that filter on ``ctx.scopes`` see nothing.
        """
        return cls(
            user=session.user, resource=session.resource, session=session, protocol_version=session.protocol_version
        )

    def with_arguments(self, arguments: dict[str, str]) -> RequestContext:
        """A copy carrying ``arguments``."""
        return replace(self, arguments=dict(arguments))

    @property
    def is_authenticated_user(self) -> bool:
        """True when a real (authenticated) user is behind the token."""
        return self.user is not None and bool(getattr(self.user, "is_authenticated", False))

    def can_request(self, method: str) -> bool:
        """True when the client declared the capability ``method`` needs (see ``ToolContext.can_request``)."""
        needed = CAPABILITY_OF.get(method)
        return needed is None or isinstance(self.client_capabilities.get(needed), dict)

    async def request_inputs(
        self, requests: Mapping[str, InputRequest | Mapping[str, Any]], *, timeout: float | None = None
    ) -> dict[str, dict[str, Any]]:
        """Ask the client several things under caller-chosen keys; ``{key: result object}``.

        Same contract as ``ToolContext.request_inputs``: 2026-07-28 ``prompts/get`` /
        ``resources/read`` end the round with ``input_required`` (the sealed ``requestState`` is
        bound to the method, the prompt name or URI and the arguments) and the renderer runs again
        on the retry; 2025-11-25: one live request per key on the streamed response.

        :raises ValueError: no requests, a bad key or an unknown method.
        :raises McpError: -32021 for an undeclared capability (2026-07-28); the client's error (2025-11-25).
        :raises InputRequired: 2026-07-28, not everything is answered yet.
        :raises RuntimeError: 2025-11-25 without a streamed response (nothing can reach the client),
            or a context built outside ``prompts/get`` / ``resources/read``.
        """
        check_input_keys(requests)
        asked = {key: as_input_request(value) for key, value in requests.items()}
        if self.era != "modern":
            if self.requester is None:
                raise RuntimeError("this request cannot ask the client (no streamed 2025-11-25 response)")
            return {key: await self.requester(r.method, r.params, timeout) for key, r in asked.items()}
        if self.input_round is None:
            raise RuntimeError("only prompts/get and resources/read can ask the client for input")
        return resolve_inputs(self.input_round, asked, self.client_capabilities)
