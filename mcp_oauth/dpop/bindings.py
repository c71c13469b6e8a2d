"""Which tokens are bound to which DPoP key.

Bindings are :class:`~mcp_oauth.models.DPoPBinding` rows keyed by the token's SHA-256. The
token cache of the resource server loads an access token's binding with the token row in one
query (:func:`binding_subquery`, the ``dpop_jkt`` attribute), so its cache entries carry
``cnf.jkt`` and the hot path reads nothing more.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from mcp_oauth.models import DPoPBinding

__all__ = [
    "JKT_ATTRIBUTE",
    "bind_tokens",
    "binding_subquery",
    "bound_jkt",
    "prune_bindings",
    "refresh_token_jkt",
]

#: The attribute of a loaded ``AccessToken`` holding its ``cnf.jkt`` ("" or None: not bound).
JKT_ATTRIBUTE = "dpop_jkt"


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def binding_subquery() -> Subquery:
    """The ``jkt`` bound to the outer ``AccessToken`` row (annotate it as :data:`JKT_ATTRIBUTE`)."""
    return Subquery(DPoPBinding.objects.filter(token_checksum=OuterRef("token_checksum")).values("jkt")[:1])


def bound_jkt(access_token: Any) -> str | None:
    """``cnf.jkt`` of an ``AccessToken``: the key thumbprint it is bound to, or None (a bearer token).

    Read from the :data:`JKT_ATTRIBUTE` loaded with the row (the token cache); one query when
    the row was loaded without it.
    """
    values = access_token.__dict__
    if JKT_ATTRIBUTE in values:
        return values[JKT_ATTRIBUTE] or None
    return DPoPBinding.objects.filter(token_checksum=access_token.token_checksum).values_list("jkt", flat=True).first()


def refresh_token_jkt(refresh_token: str) -> str | None:
    """The key thumbprint a refresh token (its value) is bound to, or None (RFC 9449 §5.4)."""
    return (
        DPoPBinding.objects.filter(token_checksum=_checksum(refresh_token), token_kind=DPoPBinding.Kind.REFRESH_TOKEN)
        .values_list("jkt", flat=True)
        .first()
    )


def bind_tokens(jkt: str, tokens: Iterable[tuple[str, str, datetime | None]]) -> None:
    """Bind each ``(token value, kind, expires)`` of ``tokens`` to ``jkt`` (one INSERT)."""
    DPoPBinding.objects.bulk_create(
        [
            DPoPBinding(token_checksum=_checksum(value), jkt=jkt, token_kind=kind, expires=expires)
            for value, kind, expires in tokens
        ]
    )


def prune_bindings(now: datetime | None = None) -> int:
    """Delete the bindings of expired tokens (and of tokens never issued, which expire too);
    returns how many."""
    deleted, _ = DPoPBinding.objects.filter(expires__lt=now or timezone.now()).delete()
    return deleted
