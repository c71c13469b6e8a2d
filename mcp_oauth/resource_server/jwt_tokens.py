"""JWT access tokens at this site's resource server (RFC 9068 §4), without a database read.

:func:`verified_token` checks a JWT access token presented to a resource that opted in
(``ProtectedResource.jwt_access_tokens``) with the key ring every process holds
(:mod:`.jwt_keys`) and the strict verification of :mod:`mcp_oauth.shared.access_jwt`
(RFC 8725: ``alg`` allow-list, ``typ`` ``at+jwt``, known ``kid``, strict JSON; ``iss``, ``aud``,
``exp``, ``nbf``), then the deny-list (a revoked token), and returns a :class:`JWTAccessToken`:
what the bearer checks of :mod:`.authentication` read of an ``AccessToken`` row (``scope``,
``resource``, ``expires``, ``cnf.jkt`` as the DPoP binding, the organization), built from the claims.

A token verified once by this process is kept (by its SHA-256, at most :data:`VERIFIED_ENTRIES`,
for the key ring's generation): used again, its signature is not verified again (an ES256
verification is about a tenth of a millisecond); its expiry, audience and the deny-list are checked
on every use.

Costs: one cache round trip (the key generation and the deny-list entry together, or nothing more
than the opaque token's read on the event loop); a query only when the key ring or a client was
not loaded yet by this process (once per key or client change). The user is a lazy object: its
``pk`` is the ``sub`` claim, its other fields are read from the database when a tool uses them.
"""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.utils.functional import SimpleLazyObject, empty
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.dpop.bindings import JKT_ATTRIBUTE
from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server import organizations
from mcp_oauth.resource_server.actors import ACTOR_ATTRIBUTE
from mcp_oauth.resource_server.jwt_keys import KeyRing, generation_and_denied, key_ring
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.access_jwt import AccessTokenClaims, InvalidAccessToken, looks_like_jwt, verify_access_token

__all__ = ["VERIFIED_ENTRIES", "JWTAccessToken", "is_jwt_for", "verified_token", "verify_with_ring"]

#: Most verified tokens a process keeps per key ring (the memo is emptied when full).
VERIFIED_ENTRIES = 10_000


class LazyUser(SimpleLazyObject):
    """The user of ``sub``: ``pk`` known without a query, the row read on first other use."""

    def __init__(self, pk: Any) -> None:
        model = get_user_model()
        self.__dict__["_known_pk"] = pk
        super().__init__(lambda: model._default_manager.get(pk=pk))

    @property
    def pk(self) -> Any:
        return self.__dict__["_known_pk"] if self._wrapped is empty else self._wrapped.pk


class JWTAccessToken:
    """A verified JWT access token, standing for the ``AccessToken`` row on the request path.

    ``pk`` is None (no row was read); ``claims`` the verified claims; ``token_checksum`` the
    SHA-256 hex digest of the token (the row's ``token_checksum``)."""

    pk = None

    def __init__(self, verified: AccessTokenClaims, checksum: str, application: Any) -> None:
        claims = verified.claims
        self.claims = claims
        self.token_checksum = checksum
        self.scope = verified.scope
        self.resource = [claims["aud"]] if isinstance(claims["aud"], str) else list(claims["aud"])
        self.expires = datetime.fromtimestamp(claims["exp"], tz=UTC)
        self.application = application
        machine = claims["sub"] == claims["client_id"]
        self.user_id = None if machine else _user_pk(claims["sub"])
        self.user = None if machine else LazyUser(self.user_id)
        self.__dict__[JKT_ATTRIBUTE] = verified.jkt or ""
        act = claims.get("act")
        self.__dict__[ACTOR_ATTRIBUTE] = act if isinstance(act, dict) else None  # BearerPrincipal.actor, no query
        organization = claims.get("organization")
        organization_id = organization.get("id") if isinstance(organization, dict) else None
        self.__dict__[organizations.ORGANIZATION_ATTRIBUTE] = organization_id
        # Membership was checked at issuance; its loss puts the token in the deny-list.
        self.__dict__[organizations.MEMBERSHIPS_ATTRIBUTE] = frozenset(
            [organization_id] if organization_id is not None else []
        )

    @property
    def actor(self) -> dict[str, Any] | None:
        """``act`` (RFC 8693 §4.1), or None."""
        act = self.claims.get("act")
        return act if isinstance(act, dict) else None

    def is_expired(self) -> bool:
        return self.claims["exp"] <= time.time()

    def __repr__(self) -> str:
        return f"<JWTAccessToken jti={self.claims.get('jti')!r}>"


def _user_pk(sub: str) -> Any:
    try:
        return get_user_model()._meta.pk.to_python(sub)
    except Exception:  # noqa: BLE001 - a sub that is no primary key of this site: refused by the caller
        raise InvalidAccessToken("The access token's subject is unknown.", "claims") from None


def is_jwt_for(resource: ProtectedResource, token: str) -> bool:
    """Whether ``token`` is checked as a JWT access token at ``resource``."""
    return resource.jwt_access_tokens and looks_like_jwt(token)


def checksum_of(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _application(ring: KeyRing, client_id: str, *, may_query: bool) -> Any:
    found = ring.applications.get(client_id)
    if found is None and may_query:
        found = get_application_model().objects.filter(client_id=client_id).first()
        if found is not None:
            ring.applications[client_id] = found
    return found


class NotInMemory(Exception):
    """The event-loop path lacks something in memory (a client not loaded yet)."""


def verify_with_ring(
    token: str, resource: ProtectedResource, ring: KeyRing, *, may_query: bool, checksum: str | None = None
) -> JWTAccessToken:
    """The checked token (signature, header, claims; not the deny-list), with its client.

    :param checksum: the token's SHA-256 hex digest, when already computed.
    :raises InvalidAccessToken: a failed check, or a client that is gone.
    :raises NotInMemory: ``may_query`` False and the client is not loaded."""
    checksum = checksum or checksum_of(token)
    known = ring.verified.get(checksum)
    if known is not None:
        if known.resource != [resource.uri]:
            raise InvalidAccessToken("The access token was not issued for this resource.", "audience")
        if known.is_expired():
            raise InvalidAccessToken("The access token has expired.", "expired")
        return known
    verified = verify_access_token(
        token,
        keys=ring.verifying_set(),
        issuer=mcp_oauth_settings.issuer,
        audience=resource.uri,
        leeway=int(mcp_oauth_settings.JWT_ACCESS_TOKEN_LEEWAY_SECONDS),
    )
    application = _application(ring, verified.client_id, may_query=may_query)
    if application is None:
        if not may_query:
            raise NotInMemory(verified.client_id)
        raise InvalidAccessToken("The access token's client is gone.", "claims")
    checked = JWTAccessToken(verified, checksum, application)
    if len(ring.verified) >= VERIFIED_ENTRIES:
        ring.verified.clear()
    ring.verified[checksum] = checked
    return checked


def verified_token(token: str, resource: ProtectedResource) -> JWTAccessToken:
    """The thread path: the key generation and the deny-list entry in one cache round trip, then
    :func:`verify_with_ring`.

    A cache outage degrades to the database (the token's row must still stand), never to a
    refused or an unchecked token.

    :raises InvalidAccessToken: a failed check, or a revoked token (``reason`` ``revoked``)."""
    checksum = checksum_of(token)
    generation, denied = generation_and_denied(checksum)
    if denied is None:  # the deny-list is unreadable: the row tells (revocation deletes it)
        denied = not get_access_token_model().objects.filter(token_checksum=checksum).exists()
    if denied:
        raise InvalidAccessToken("The access token was revoked.", "revoked")
    return verify_with_ring(token, resource, key_ring(generation), may_query=True, checksum=checksum)
