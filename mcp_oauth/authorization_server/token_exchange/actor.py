"""The exchanged token's lifetime, subject and actor, written before its row (RFC 8693 §2.2.1, §4.1).

:func:`bind_exchange` (the request validator, after the organization's policy and before the DPoP
binding and any token row) caps ``expires_in`` at the subject token's remaining life (an
organization's ``access_token_lifetime`` applied before cannot outlive it either) and writes its
:class:`~mcp_oauth.models.TokenActor` row (the subject token's checksum; ``act`` for a delegated
token), as the organization and DPoP bindings are written: a delegated token never exists without
its actor. :func:`revoke_exchanged` revokes the tokens exchanged for revoked ones (the revocation
endpoint, RFC 7009).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from oauth2_provider.models import get_access_token_model
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.authorization_server.token_exchange.decision import TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.models import TokenActor
from mcp_oauth.resource_server.cache import token_checksum

__all__ = ["bind_exchange", "prune_token_actors", "revoke_exchanged"]


def bind_exchange(token: dict[str, Any], request: Any) -> None:
    """For a token-exchange grant: cap ``token["expires_in"]`` and write the actor row (see the module).
    Call it in the transaction that locks the subject token (the request validator's
    ``exchange_transaction``: a revocation of the subject token runs wholly before or after it).

    :raises oauthlib.oauth2.rfc6749.errors.InvalidGrantError: the subject token expired or was
        revoked meanwhile.
    """
    if request.grant_type != TOKEN_EXCHANGE_GRANT_TYPE:
        return
    subject = request._mcp_exchange_subject
    if not get_access_token_model().objects.select_for_update().filter(pk=subject.pk).exists():
        raise errors.InvalidGrantError(description="The subject token was revoked.", request=request)
    now = timezone.now()
    remaining = int((subject.expires - now).total_seconds())
    if remaining < 1:
        raise errors.InvalidGrantError(description="The subject token has expired.", request=request)
    token["expires_in"] = min(int(token["expires_in"]), remaining)
    token.pop("refresh_token", None)
    TokenActor.objects.create(
        token_checksum=token_checksum(token["access_token"]),
        act=getattr(request, "mcp_act", None) or None,
        subject_token_checksum=subject.token_checksum,
        expires=now + timedelta(seconds=token["expires_in"]),
    )


def revoke_exchanged(checksums: list[str]) -> int:
    """Revoke (delete, as RFC 7009 §2.1 does) the access tokens exchanged for the tokens whose
    checksums are ``checksums``, and those exchanged for them, the whole chain (A exchanged for B, B
    for C, ...: each generation is one query; a chain is as long as the exchanges a client made, and
    a token seen once is not followed again).
    Their cache entries are invalidated by the ``AccessToken`` deletion signal. Call it in the
    revoking transaction.

    :returns: how many tokens were revoked.
    """
    AccessToken = get_access_token_model()
    seen = set(checksums)
    frontier = [checksum for checksum in checksums if checksum]
    revoked = 0
    while frontier:
        children = [
            checksum
            for checksum in TokenActor.objects.filter(subject_token_checksum__in=frontier).values_list(
                "token_checksum", flat=True
            )
            if checksum not in seen
        ]
        seen.update(children)
        for access_token in AccessToken.objects.filter(token_checksum__in=children):
            access_token.revoke()
            revoked += 1
        frontier = children
    return revoked


def prune_token_actors(now=None) -> int:
    """Delete the rows of expired tokens (and of grants that failed, which expire too); returns how many."""
    deleted, _ = TokenActor.objects.filter(expires__lt=now or timezone.now()).delete()
    return deleted
