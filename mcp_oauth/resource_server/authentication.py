"""Bearer-token authentication for protected resources (OAuth 2.1 §5, RFC 6750, RFC 8707).

:func:`authenticate_bearer` is the one place where an access token is checked:
it is read only from the ``Authorization`` header, looked up by its hash (through the shared token cache,
:mod:`mcp_oauth.resource_server.cache`, whose entries are invalidated on revocation,
deletion, user deactivation and client changes), and
accepted only when it is unexpired, bound exactly to the resource being served,
belongs to an active user (or is a client-credentials token) and carries the
required scopes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponse

from mcp_oauth.dpop.replay import jti_key, jti_window
from mcp_oauth.dpop.resource import (
    DPoPRefusal,
    check_request,
    dpop_token_from_header,
    lane_binding_ok,
    lane_proof,
    mark_recorded,
)
from mcp_oauth.models import Organization, ProtectedResource
from mcp_oauth.observability.metrics import count_dpop_proof_error
from mcp_oauth.resource_server.actors import token_actor
from mcp_oauth.resource_server.cache import (
    RESOURCE_GENERATION_KEY,
    TOKEN_PREFIX,
    aadd_and_get_many,
    access_token_by_checksum,
    aget_many,
    organization_by_pk,
    organization_from_generation,
    resource_by_uri,
    resource_from_generation,
    token_checksum,
    token_from_entry,
    tombstone,
)
from mcp_oauth.resource_server.challenges import challenge_response
from mcp_oauth.resource_server.jwt_keys import KEYS_GENERATION_KEY, deny_key, key_ring_for_generation
from mcp_oauth.resource_server.jwt_tokens import (
    JWTAccessToken,
    NotInMemory,
    is_jwt_for,
    verified_token,
    verify_with_ring,
)
from mcp_oauth.resource_server.organizations import NotLoaded, OrganizationRefused, token_organization
from mcp_oauth.resource_server.revocation import is_local, watch
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.access_jwt import InvalidAccessToken, looks_like_jwt
from mcp_oauth.shared.scopes import missing as scope_missing
from mcp_oauth.signals import organization_membership_lost


@dataclass(frozen=True)
class BearerPrincipal:
    """Who a valid token speaks for.

    ``user`` is None for a client-credentials token; ``scopes`` are the token's
    granted scopes; ``resource`` is the resource the token is bound to (and that
    was requested); ``organization`` is the :class:`~mcp_oauth.models.Organization` the request
    acts for: ``resource.organization`` at a per-organization endpoint, else the one the token was
    chosen for on a shared endpoint (its ``TokenOrganization``), else None
    (:mod:`mcp_oauth.resource_server.organizations`). The row is shared by the requests of the
    process: read it, do not modify it.
    """

    user: Any
    application: Any
    access_token: Any
    scopes: frozenset[str]
    resource: ProtectedResource
    organization: Organization | None = None

    @property
    def client_id(self) -> str | None:
        return self.application.client_id if self.application is not None else None

    @property
    def actor(self) -> dict[str, Any] | None:
        """The RFC 8693 §4.1 ``act`` claim of a token issued by token exchange for another resource
        (``{"sub": "<client_id of the exchanging client>", "act"?: {...}}``), else None. Loaded with
        the token (the token cache): no query."""
        return token_actor(self.access_token)

    @property
    def is_machine(self) -> bool:
        """True for a token that speaks for no user: the client itself (``client_credentials``,
        MCP ext-auth "OAuth Client Credentials"), a machine principal."""
        return self.user is None


@dataclass
class BearerChallenge(Exception):
    """Authentication or authorization failed; :meth:`response` is what to send.

    ``status`` is 401 (no, invalid, expired, revoked or foreign token) or 403
    (``insufficient_scope``). ``scopes`` is the ``scope`` to advertise.
    """

    resource: ProtectedResource
    status: int = 401
    error: str | None = None
    error_description: str | None = None
    scopes: list[str] | None = field(default=None)
    #: The request that failed: the challenge names the metadata URL in the spelling it used
    #: (loopback development sites, :mod:`mcp_oauth.shared.origins`).
    request: HttpRequest | None = field(default=None, repr=False, compare=False)
    #: The failure concerns DPoP (RFC 9449 §7.1): the error goes in a ``DPoP`` challenge.
    dpop: bool = False
    #: ``DPoP-Nonce`` to send (``use_dpop_nonce``, RFC 9449 §9).
    dpop_nonce: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.error_description or self.error or "authentication required")

    def response(self) -> HttpResponse:
        return challenge_response(
            self.resource,
            self.status,
            error=self.error,
            error_description=self.error_description,
            scopes=self.scopes,
            request=self.request,
            dpop=self.dpop,
            dpop_nonce=self.dpop_nonce,
        )


#: RFC 6750 §2.1 b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=" (its characters).
_B64TOKEN_CHARS = re.compile(r"[A-Za-z0-9\-._~+/=]+")


def bearer_token_from_header(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value (scheme case-insensitive).

    :returns: None when the header is absent or uses another scheme.
    :raises ValueError: the Bearer credentials are malformed (empty, spaces, non-b64token characters).
    """
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    token = token.strip()
    if len(token) > 4096 or not _B64TOKEN_CHARS.fullmatch(token):
        raise ValueError("malformed bearer token")
    return token


def authenticate_bearer(
    request: HttpRequest, resource: ProtectedResource, required_scopes: Iterable[str] = ()
) -> BearerPrincipal:
    """Authenticate ``request`` for ``resource`` (see :func:`_authenticate_bearer`); a
    :class:`BearerChallenge` raised carries ``request``."""
    try:
        return _authenticate_bearer(request, resource, required_scopes)
    except BearerChallenge as challenge:
        challenge.request = request
        raise


def _authenticate_bearer(
    request: HttpRequest, resource: ProtectedResource, required_scopes: Iterable[str] = ()
) -> BearerPrincipal:
    """Authenticate ``request`` for ``resource``.

    :param required_scopes: scopes needed beyond the resource's own required scopes.
    :returns: the :class:`BearerPrincipal` of a valid token.
    :raises BearerChallenge: 401 without ``error`` when no token was sent;
        401 ``invalid_request`` for a token in the query string (OAuth 2.1 §5.1.2:
        not accepted there); 401 ``invalid_token`` for a malformed, unknown,
        expired or revoked token, or one bound to another resource (RFC 8707,
        MCP "Token Audience Binding"); 403 ``insufficient_scope`` when scopes are missing.
    """
    needed = list(dict.fromkeys([*resource.scope_list, *required_scopes]))
    if "access_token" in request.GET:
        raise BearerChallenge(
            resource,
            error="invalid_request",
            error_description="Access tokens are accepted only in the Authorization header.",
            scopes=needed,
        )
    header = request.headers.get("Authorization")
    used_dpop = False
    try:
        token = dpop_token_from_header(header)  # RFC 9449 §7.1
        used_dpop = token is not None
        if token is None:
            token = bearer_token_from_header(header)
    except ValueError:
        raise BearerChallenge(
            resource,
            error="invalid_token",
            error_description="The access token is malformed.",
            scopes=needed,
            dpop=bool(header and header[:5].lower() == "dpop "),
        ) from None
    if token is None:
        raise BearerChallenge(resource, scopes=needed)

    if is_jwt_for(resource, token):  # RFC 9068: verified with the published keys, no query
        try:
            access_token = verified_token(token, resource)
        except InvalidAccessToken as invalid:
            raise BearerChallenge(
                resource, error="invalid_token", error_description=str(invalid), scopes=needed, dpop=used_dpop
            ) from None
    else:
        access_token = access_token_by_checksum(token_checksum(token))
    try:
        principal = _principal(request, resource, access_token, needed, organization_by_pk)
    except BearerChallenge as challenge:
        challenge.dpop = used_dpop
        raise
    try:
        check_request(request, resource, token, access_token, used_dpop)
    except DPoPRefusal as refusal:
        count_dpop_proof_error("resource", refusal.error)
        raise BearerChallenge(
            resource,
            error=refusal.error,
            error_description=refusal.description,
            scopes=needed,
            dpop=True,
            dpop_nonce=refusal.nonce,
        ) from None
    return principal


def _principal(
    request: HttpRequest,
    resource: ProtectedResource,
    access_token: Any,
    needed: list[str],
    organization_of: Callable[[Any], Organization | None],
    *,
    may_query: bool = True,
) -> BearerPrincipal:
    """Every check of a looked-up token (no I/O with the default adapter): the principal, or
    :class:`BearerChallenge`.

    :param organization_of: the organization registry's lookup by pk.
    :param may_query: False on the event loop (:class:`~.organizations.NotLoaded` is raised
        rather than a query made)."""
    if access_token is None:
        raise BearerChallenge(
            resource, error="invalid_token", error_description="The access token is invalid.", scopes=needed
        )
    if access_token.is_expired():
        raise BearerChallenge(
            resource, error="invalid_token", error_description="The access token has expired.", scopes=needed
        )
    if list(access_token.resource or []) != [resource.uri]:
        raise BearerChallenge(
            resource,
            error="invalid_token",
            error_description="The access token was not issued for this resource.",
            scopes=needed,
        )
    # A JWT access token (RFC 9068): its user (a lazy object, pk known) stands unless the token was
    # denied (deactivation puts the user's tokens in the deny-list): no query here.
    jwt = isinstance(access_token, JWTAccessToken)
    user = mcp_oauth_settings.adapter.user_for_token(access_token)
    if not jwt and user is not None and not user.is_active:
        raise BearerChallenge(
            resource, error="invalid_token", error_description="The access token is invalid.", scopes=needed
        )
    application = access_token.application
    if application is None or not application.is_usable(request):
        raise BearerChallenge(
            resource, error="invalid_token", error_description="The access token is invalid.", scopes=needed
        )
    try:
        organization = token_organization(resource, access_token, user, organization_of, may_query=may_query)
    except OrganizationRefused as refused:
        if refused.not_member is not None and may_query:  # the adapter no longer lists the membership
            organization_membership_lost.send(sender=Organization, organization=refused.not_member, user=user)
        raise BearerChallenge(
            resource, error="invalid_token", error_description="The access token is invalid.", scopes=needed
        ) from None
    granted = frozenset(access_token.scope.split())
    missing = scope_missing(granted, needed)  # honours MCP_OAUTH["SCOPE_HIERARCHY"]
    if missing:
        raise BearerChallenge(
            resource,
            status=403,
            error="insufficient_scope",
            error_description="The access token lacks the scopes: " + " ".join(missing),
            scopes=needed,  # every scope the request needs, the same for every token (MCP 2026-07-28)
        )
    return BearerPrincipal(
        user=user,
        application=application,
        access_token=access_token,
        scopes=granted,
        resource=resource,
        organization=organization,
    )


class PrincipalGone(Exception):
    """Raised where a row of the principal is not found because the token no longer stands
    (:func:`principal_gone`): the MCP endpoint answers 401 ``invalid_token``."""


def principal_gone(principal: BearerPrincipal) -> bool:
    """Whether the token ``principal`` was authenticated with no longer stands: its row, user or
    client was deleted (RFC 7009 revocation deletes the row; deleting a user or client cascades to
    it), or its user was deactivated since. One query; run where a write keyed to the principal
    failed (``IntegrityError`` on a foreign key) or a session bound to it is not found, so that the
    answer is 401 ``invalid_token`` (RFC 6750 §3.1), never 500 or 404.

    When gone, this process's cached lookup of the token is tombstoned too.
    """
    access_token = principal.access_token
    if getattr(access_token, "pk", None) is None:
        return False  # a token of a site's own adapter: nothing here to look up
    row = type(access_token).objects.select_related("user", "application").filter(pk=access_token.pk).first()
    gone = row is None or row.application is None or (row.user_id is not None and not row.user.is_active)
    if gone:
        tombstone([TOKEN_PREFIX + access_token.token_checksum])
    return gone


def invalid_token(resource: ProtectedResource) -> BearerChallenge:
    """The 401 ``invalid_token`` challenge of a token that no longer stands (RFC 6750 §3.1)."""
    return BearerChallenge(
        resource,
        error="invalid_token",
        error_description="The access token is invalid.",
        scopes=list(dict.fromkeys(resource.scope_list)),
    )


def _default_authentication(adapter: Any) -> bool:
    return adapter.keeps_default_token_checks()  # the class is looked up each time: a patch is honoured


async def authenticate_bearer_cached(
    request: HttpRequest, resource_uri: str, also: Sequence[str] = (), into: dict[str, Any] | None = None
) -> BearerPrincipal | None:
    """The principal of ``request`` for the resource ``resource_uri`` when the resource registry
    and the token's cache entry answer without I/O beyond one cache read from the event loop
    (:func:`~.cache.aget_many`), and the token passes every check of :func:`authenticate_bearer`.

    :returns: None in every other case (no or malformed token, cache miss or tombstone, stale
        registry, a revocation stamp due for a re-read (a token cache that is not shared,
        :mod:`~mcp_oauth.resource_server.revocation`), any refusal, an adapter that overrides ``authenticate_request`` or
        ``user_for_token``): the caller then runs the adapter's ``authenticate_request`` in a
        thread, which reads the database and gives the exact answer. Never a wrong acceptance:
        the entries it trusts are the ones :func:`authenticate_bearer` trusts.
    :param also: more token-cache keys to read in the same round trip (e.g. the session's);
        the entries found are put in ``into``.
    """
    if not _default_authentication(mcp_oauth_settings.adapter) or (
        request.META.get("QUERY_STRING") and "access_token" in request.GET
    ):
        return None
    if is_local() and not watch.fresh():  # a cache of this process's own: the stamp is due (a query)
        return None
    header = request.headers.get("Authorization")
    try:
        token = dpop_token_from_header(header)  # RFC 9449 §7.1
        used_dpop = token is not None
        if token is None:
            token = bearer_token_from_header(header)
    except ValueError:
        return None
    if token is None:
        return None
    jwt_candidate = looks_like_jwt(token)
    checksum = token_checksum(token)
    # A JWT (RFC 9068): its deny-list entry and the key generation instead of a token entry.
    token_key = deny_key(checksum) if jwt_candidate else TOKEN_PREFIX + checksum
    keys = [RESOURCE_GENERATION_KEY, token_key, *also]
    if jwt_candidate:
        keys.append(KEYS_GENERATION_KEY)
    proof = None
    if used_dpop:  # RFC 9449 §7: the proof checked first, its jti recorded with the lookup
        proof = lane_proof(request, token)
        if proof is None:  # no proof, or a failed one: the thread path answers
            return None
        found = await aadd_and_get_many(jti_key(proof.jkt, proof.jti), jti_window(), keys)
        if found is None or not found[0]:  # no event-loop cache, or a replay: the thread path answers
            return None
        mark_recorded(request, proof)
        values: dict[str, Any] | None = found[1]
    else:
        values = await aget_many(keys)
    if values is None:
        return None
    if into is not None:
        into.update((key, values[key]) for key in also if key in values)
    generation = values.get(RESOURCE_GENERATION_KEY)
    resource = resource_from_generation(resource_uri, generation)
    if resource is None:
        return None
    if jwt_candidate and resource.jwt_access_tokens:
        ring = key_ring_for_generation(values.get(KEYS_GENERATION_KEY))
        if token_key in values or ring is None:  # revoked, or keys to load: the thread path answers
            return None
        try:
            access_token: Any = verify_with_ring(token, resource, ring, may_query=False, checksum=checksum)
        except (InvalidAccessToken, NotInMemory):
            return None
    else:
        access_token = None if jwt_candidate else token_from_entry(values.get(token_key))
    if access_token is None:
        return None

    def organization_of(pk: Any) -> Organization | None:
        found = organization_from_generation(pk, generation)
        if found is None:
            raise NotLoaded("organization")
        return found

    try:
        principal = _principal(
            request,
            resource,
            access_token,
            list(dict.fromkeys(resource.scope_list)),
            organization_of,
            may_query=False,
        )
    except (BearerChallenge, NotLoaded):
        return None
    return principal if lane_binding_ok(resource, access_token, proof) else None


def resolve_resource(resource_uri: str | None = None) -> ProtectedResource:
    """The enabled resource with ``resource_uri``, or the default one when None.

    :raises ProtectedResource.DoesNotExist: no such enabled resource.
    :raises mcp_oauth.shared.resource_uris.InvalidResource: ``resource_uri`` is not a resource URI.
    """
    if resource_uri is None:
        return ProtectedResource.objects.default()
    return resource_by_uri(resource_uri)
