"""The reference site with the bearer check taken out: the baseline of the auth overhead (bench only).

Same lane, view, session lookup and tool as ``project.asgi``; the view's cached bearer check
(:func:`~mcp_oauth.resource_server.authentication.authenticate_bearer_cached`) is replaced by a
dict lookup of the ``Authorization`` header that returns the principal found on the token's
first use (the session's cache entry is still read, in the same single round trip as before).
``bench/prod_topology.py --only compare`` serves it as ``ours-noauth``: ours ÷ ours-noauth is
what the bearer check costs. Never serve this: it accepts a revoked token.
"""

from __future__ import annotations

from typing import Any

from project.asgi import application  # first: sets Django up

__all__ = ["application"]

from mcp_oauth.mcp_server.transport import views
from mcp_oauth.resource_server import authentication  # after Django is set up
from mcp_oauth.resource_server.cache import aget_many

_principals: dict[str, Any] = {}
_checked = authentication.authenticate_bearer_cached


async def _unchecked(request: Any, resource_uri: str, also: Any = (), into: dict[str, Any] | None = None) -> Any:
    header = request.headers.get("Authorization")
    principal = _principals.get(header)
    if principal is None:
        principal = await _checked(request, resource_uri, also, into)
        if principal is not None:
            _principals[header] = principal
        return principal
    values = await aget_many(list(also)) if also else {}
    if into is not None and values:
        into.update(values)
    return principal


views.authenticate_bearer_cached = _unchecked  # type: ignore[assignment]
