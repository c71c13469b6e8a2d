"""What resource readers, prompt renderers and completers receive: :class:`RequestContext`."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.http import HttpRequest

    from ..models import McpSession, ProtectedResource
    from ..resource_server.authentication import BearerPrincipal

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
    template reader: the matched URI variables as strings).
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

    @classmethod
    def for_principal(
        cls,
        principal: BearerPrincipal,
        *,
        request: HttpRequest | None = None,
        session: McpSession | None = None,
        protocol_version: str = "",
        method: str = "",
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
