"""JWT access tokens (RFC 9068) for the resources that opted in (``ProtectedResource.jwt_access_tokens``).

:func:`mint` runs in the request validator's ``save_bearer_token``, after the grant's organization
and DPoP binding are decided and before any token row is written: for a grant bound to one
resource that opted in, the opaque value oauthlib drew (``token["access_token"]``) is replaced by
a JWT signed with the current key (:mod:`.signing_keys`), and the rows already written under the
opaque value's checksum (the ``TokenOrganization``, ``DPoPBinding`` and ``TokenActor`` of the
access token) are moved to the JWT's. The access-token row is still written (refresh, revocation, introspection and
the admin work as for an opaque token).

Claims (RFC 9068 §2.2): ``iss``; ``sub`` (the user's primary key as a string, or the
``client_id`` for a token that speaks for no user, §2.2 ``client_credentials``); ``aud`` (the
resource URI, RFC 8707); ``client_id``; ``scope``; ``iat``; ``exp`` (``iat`` +
``token["expires_in"]``: oauthlib's ``request.expires_in``, or the organization's own lifetime);
``jti``; ``cnf.jkt`` (a DPoP-bound token, RFC 9449 §6.1); ``act`` (``request.mcp_act``, a token
exchange, RFC 8693 §4.1); ``organization`` (``{"id", "slug"}``, a token that acts for one).

No signing key (none created, or every key retired): the opaque token is kept, logged as an error
(``manage.py check --database default`` reports it: E170).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from mcp_oauth.authorization_server.token_endpoint.dpop import current_proof
from mcp_oauth.authorization_server.tokens.signing_keys import private_key
from mcp_oauth.models import DPoPBinding, ProtectedResource, TokenActor, TokenOrganization
from mcp_oauth.resource_server.cache import resource_by_uri
from mcp_oauth.resource_server.jwt_keys import key_ring
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.access_jwt import sign_access_token

__all__ = ["access_token_claims", "mint"]

logger = logging.getLogger("mcp_oauth.authorization_server")


def _checksum(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def _jwt_resource(resources: list[str]) -> ProtectedResource | None:
    if len(resources) != 1:
        return None
    try:
        resource = resource_by_uri(resources[0])
    except (ProtectedResource.DoesNotExist, ValueError):
        return None
    return resource if resource.jwt_access_tokens else None


def access_token_claims(token: dict[str, Any], request: Any, resource: ProtectedResource, now: int) -> dict[str, Any]:
    """The claims of the JWT access token of ``token`` (oauthlib's response, bindings decided)."""
    client_id = request.client.client_id
    user_pk = getattr(getattr(request, "user", None), "pk", None)
    claims: dict[str, Any] = {
        "iss": mcp_oauth_settings.issuer,
        "sub": str(user_pk) if user_pk is not None else client_id,
        "aud": resource.uri,
        "client_id": client_id,
        "scope": token.get("scope", ""),
        "iat": now,
        "exp": now + int(token["expires_in"]),
        "jti": secrets.token_urlsafe(16),
    }
    proof = current_proof()
    if proof is not None and token.get("token_type") == "DPoP":
        claims["cnf"] = {"jkt": proof.jkt}
    act = getattr(request, "mcp_act", None)
    if act:
        claims["act"] = act
    organization = getattr(request, "_mcp_organization", None)
    if organization is not None:
        claims["organization"] = {"id": organization.pk, "slug": organization.slug}
    return claims


def mint(token: dict[str, Any], request: Any, resources: Callable[[], list[str]]) -> bool:
    """Replace ``token["access_token"]`` by an RFC 9068 JWT when the grant's resource opted in.

    :param resources: the canonical resource URIs the tokens are bound to.
    :returns: whether the token is now a JWT."""
    resource = _jwt_resource(resources())
    if resource is None:
        return False
    signing = key_ring().signing_key()
    if signing is None:
        logger.error("no access-token signing key: an opaque token was issued for %s", resource.uri)
        return False
    claims = access_token_claims(token, request, resource, int(time.time()))
    value = sign_access_token(claims, private_key=private_key(signing.private_key), kid=signing.kid, alg=signing.alg)
    old, new = _checksum(token["access_token"]), _checksum(value)
    token["access_token"] = value
    TokenOrganization.objects.filter(token_checksum=old, token_kind=TokenOrganization.Kind.ACCESS_TOKEN).update(
        token_checksum=new
    )
    # A token-exchange token's TokenActor (RFC 8693: its act, its subject token) was written too.
    TokenActor.objects.filter(token_checksum=old).update(token_checksum=new)
    if "cnf" in claims:
        DPoPBinding.objects.filter(token_checksum=old, token_kind=DPoPBinding.Kind.ACCESS_TOKEN).update(
            token_checksum=new
        )
    return True
