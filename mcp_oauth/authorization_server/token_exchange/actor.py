"""The exchanged token's lifetime and actor, written before its row (RFC 8693 §2.2.1, §4.1).

:func:`bind_exchange` (the request validator, after the organization's policy and before the DPoP
binding and any token row) caps ``expires_in`` at the subject token's remaining life (an
organization's ``access_token_lifetime`` applied before cannot outlive it either) and, for a
delegated token, writes its :class:`~mcp_oauth.models.TokenActor` row (``act``), as the organization
and DPoP bindings are written: a delegated token never exists without its actor.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.authorization_server.token_exchange.decision import TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.models import TokenActor
from mcp_oauth.resource_server.cache import token_checksum

__all__ = ["bind_exchange", "prune_token_actors"]


def bind_exchange(token: dict[str, Any], request: Any) -> None:
    """For a token-exchange grant: cap ``token["expires_in"]`` and write the actor row (see the module).

    :raises oauthlib.oauth2.rfc6749.errors.InvalidGrantError: the subject token expired meanwhile.
    """
    if request.grant_type != TOKEN_EXCHANGE_GRANT_TYPE:
        return
    subject = request._mcp_exchange_subject
    now = timezone.now()
    remaining = int((subject.expires - now).total_seconds())
    if remaining < 1:
        raise errors.InvalidGrantError(description="The subject token has expired.", request=request)
    token["expires_in"] = min(int(token["expires_in"]), remaining)
    token.pop("refresh_token", None)
    act = getattr(request, "mcp_act", None)
    if act:
        TokenActor.objects.create(
            token_checksum=token_checksum(token["access_token"]),
            act=act,
            subject_token_checksum=subject.token_checksum,
            expires=now + timedelta(seconds=token["expires_in"]),
        )


def prune_token_actors(now=None) -> int:
    """Delete the rows of expired tokens (and of grants that failed, which expire too); returns how many."""
    deleted, _ = TokenActor.objects.filter(expires__lt=now or timezone.now()).delete()
    return deleted
