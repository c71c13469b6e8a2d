"""The actor of a token issued by token exchange (RFC 8693 §4.1 ``act``), at the resource server.

The ``act`` of an access token (its :class:`~mcp_oauth.models.TokenActor` row) is loaded with the
token row in the same query (:func:`actor_subquery`, the :data:`ACTOR_ATTRIBUTE` attribute) by the
token cache (:mod:`mcp_oauth.resource_server.cache`), so a cached principal carries it and the hot
path reads nothing more.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import OuterRef, Subquery

from mcp_oauth.models import TokenActor

__all__ = ["ACTOR_ATTRIBUTE", "actor_subquery", "token_actor"]

#: The attribute of a loaded ``AccessToken`` holding its ``act`` claim (None: not delegated).
ACTOR_ATTRIBUTE = "mcp_act"


def actor_subquery() -> Subquery:
    """The ``act`` of the outer ``AccessToken`` row (annotate it as :data:`ACTOR_ATTRIBUTE`)."""
    return Subquery(TokenActor.objects.filter(token_checksum=OuterRef("token_checksum")).values("act")[:1])


def token_actor(access_token: Any) -> dict[str, Any] | None:
    """The RFC 8693 §4.1 ``act`` of an ``AccessToken`` (``{"sub": ..., "act"?: {...}}``), or None.

    Read from :data:`ACTOR_ATTRIBUTE` loaded with the row (the token cache); one query when the row
    was loaded without it.
    """
    if access_token is None:
        return None
    values = access_token.__dict__
    if ACTOR_ATTRIBUTE in values:
        value = values[ACTOR_ATTRIBUTE]
    else:
        value = (
            TokenActor.objects.filter(token_checksum=access_token.token_checksum).values_list("act", flat=True).first()
        )
    if isinstance(value, str):  # a JSON subquery's value, on backends that do not decode it
        value = json.loads(value)
    return value if isinstance(value, dict) else None
