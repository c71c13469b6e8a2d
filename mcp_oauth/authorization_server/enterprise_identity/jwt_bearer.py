"""The RFC 7523 §2.1 JWT bearer grant with an ID-JAG: Enterprise-Managed Authorization (AS side).

MCP ext-auth "Enterprise-Managed Authorization" §5 and draft-ietf-oauth-identity-assertion-authz-grant:
``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` with ``assertion`` = an Identity Assertion
JWT Authorization Grant, from an authenticated client (``client_secret_basic`` / ``_post`` or
``private_key_jwt``). Checks, all of RFC 7521 §5.2 and the profile's §5.1:

* the client authenticates (``invalid_client``) and is an allowed client of an enabled
  :class:`~mcp_oauth.models.EnterpriseIdentityProvider` (``unauthorized_client``);
* the assertion (``invalid_grant`` for each): header ``typ`` = ``oauth-id-jag+jwt``; ``iss`` = a
  trusted, enabled IdP; an algorithm the IdP allows; the signature with the IdP's keys (JWKS URL
  fetched with the CIMD SSRF rules); ``aud`` = our issuer; ``exp`` / ``iat`` required and sane;
  ``sub``; ``client_id`` = the authenticated client, which the IdP allows; ``resource`` a resource
  we serve (``invalid_target``) that the IdP allows; a ``resource`` parameter, when sent, names the
  same resource (``invalid_target``); ``jti`` used once, across workers;
* the user: :meth:`~mcp_oauth.adapter.DefaultMCPAdapter.enterprise_user` (``invalid_grant`` when none);
* organizations: an IdP whose ``organization`` is set yields tokens for that organization alone:
  a resource of another organization's endpoint is ``invalid_grant``, and the user must be one of
  the organization's members (the adapter; ``invalid_grant``); the token acts for it
  (:mod:`mcp_oauth.authorization_server.organizations.token_binding`: its scopes and lifetime);
* scopes: the request's ``scope`` (else the ID-JAG's, else the default scopes) ∩ the ID-JAG's
  ``scope`` ∩ the IdP's ``allowed_scopes``; empty: ``invalid_scope``.

The access token is bound to the ID-JAG's resource; no refresh token is issued (the client
redeems a fresh ID-JAG instead, so the IdP's policy is applied again). The ``token.issued`` audit
event carries ``idp`` and ``sub``; refusals are written as ``assertion.refused`` / ``assertion.replayed``.
"""

from __future__ import annotations

import logging
from typing import Any

from oauthlib.oauth2.rfc6749 import errors, utils
from oauthlib.oauth2.rfc6749.grant_types import ClientCredentialsGrant

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.client_auth.assertions import (
    AssertionRefused,
    remember_jti,
    unverified,
    verify_assertion,
)
from mcp_oauth.authorization_server.client_auth.client_assertion import ID_JAG_TYP
from mcp_oauth.authorization_server.client_auth.jwks import KeysUnavailable, signer_keys
from mcp_oauth.authorization_server.enterprise_identity.providers import provider_for_issuer
from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.models import AuditEvent
from mcp_oauth.settings import mcp_oauth_settings

log = logging.getLogger("mcp_oauth.enterprise")

JWT_BEARER_GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def _refuse(request, message: str, reason: str, error=errors.InvalidGrantError, **detail: Any) -> errors.OAuth2Error:
    kind = AuditEvent.Kind.ASSERTION_REPLAYED if reason == "replay" else AuditEvent.Kind.ASSERTION_REFUSED
    record(
        kind,
        request=request,
        client_id=getattr(getattr(request, "client", None), "client_id", "") or "",
        detail={"assertion_kind": "id_jag", "reason": reason, "description": message, **detail},
    )
    if error is errors.CustomOAuth2Error:
        return errors.CustomOAuth2Error(error="invalid_target", description=message, request=request)
    return error(description=message, request=request)


def _scope_claim(claims: dict[str, Any]) -> list[str] | None:
    value = claims.get("scope")
    if value is None:
        return None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        value = " ".join(value)
    if not isinstance(value, str):
        raise AssertionRefused("The ID-JAG's scope claim must be a space-separated string.", "scope")
    return value.split()


class JWTBearerGrant(ClientCredentialsGrant):
    """oauthlib grant handler of ``urn:ietf:params:oauth:grant-type:jwt-bearer`` (token endpoint only).

    ``create_token_response`` is the client-credentials one: a token without refresh token,
    saved through the request validator.
    """

    def validate_token_request(self, request) -> None:
        """Authenticate the client, verify the ID-JAG, pick the user, resource and scopes.

        Sets ``request.user``, ``request.scopes``, ``request._mcp_assertion_resource`` and
        ``request._mcp_grant_detail``.

        :raises OAuth2Error: ``invalid_request``, ``invalid_client``, ``unauthorized_client``,
            ``invalid_grant``, ``invalid_target``, ``invalid_scope`` (RFC 6749 §5.2, RFC 8707 §2).
        """
        for validator in self.custom_validators.pre_token:
            validator(request)
        if request.grant_type != JWT_BEARER_GRANT_TYPE:
            raise errors.UnsupportedGrantTypeError(request=request)
        for param in ("grant_type", "scope", "assertion"):
            if param in request.duplicate_params:
                raise errors.InvalidRequestError(description=f"Duplicate {param} parameter.", request=request)
        if not getattr(request, "assertion", None):
            raise errors.InvalidRequestError(description="The assertion parameter is required.", request=request)
        self.validate_client_confidential(request)
        self.validate_grant_type(request)
        provider, claims = self._verified_claims(request)
        request.scopes = self._scopes(request, provider, claims)
        if not self.request_validator.validate_scopes(request.client_id, request.scopes, request.client, request):
            raise errors.InvalidScopeError(request=request)
        user = mcp_oauth_settings.adapter.enterprise_user(provider, claims, request)
        if user is None or not getattr(user, "is_active", False):
            raise _refuse(
                request, "No account of this site is linked to the asserted user.", "no_user", sub=claims["sub"]
            )
        organization_id = getattr(request, "_mcp_idp_organization_id", None)
        if organization_id is not None and organization_id not in mcp_oauth_settings.adapter.organization_memberships(
            user
        ):
            raise _refuse(
                request,
                "The asserted user is not a member of the organization this grant acts for.",
                "organization",
                issuer=provider.issuer,
            )
        try:
            remember_jti(request._mcp_verified_assertion, "id_jag")
        except AssertionRefused as refused:
            raise _refuse(request, str(refused), refused.reason, issuer=provider.issuer) from None
        request.user = user
        request._mcp_grant_detail = {"idp": provider.issuer, "sub": claims["sub"]}
        for validator in self.custom_validators.post_token:
            validator(request)

    def _verified_claims(self, request):
        try:
            header, unverified_claims = unverified(request.assertion)
        except AssertionRefused as refused:
            raise _refuse(request, str(refused), refused.reason) from None
        if not isinstance(header.get("typ"), str) or header["typ"].lower().removeprefix("application/") != ID_JAG_TYP:
            raise _refuse(request, f'The assertion\'s typ header must be "{ID_JAG_TYP}".', "typ")
        provider = provider_for_issuer(unverified_claims.get("iss"))
        if provider is None:
            issuer = unverified_claims.get("iss")
            raise _refuse(
                request,
                "The assertion's issuer is not a trusted identity provider.",
                "unknown_issuer",
                issuer=str(issuer)[:255],
            )
        kid = header.get("kid") if isinstance(header.get("kid"), str) else None
        try:
            keys = signer_keys(provider.jwks, provider.jwks_uri, kid)
            request._mcp_verified_assertion = verify_assertion(
                request.assertion,
                keys,
                audiences=[mcp_oauth_settings.issuer],
                algorithms=provider.algorithm_list,
                typ=ID_JAG_TYP,
                issuer=provider.issuer,
                require_iat=True,
            )
        except KeysUnavailable as unavailable:
            raise _refuse(request, str(unavailable), unavailable.reason, issuer=provider.issuer) from None
        except AssertionRefused as refused:
            raise _refuse(request, str(refused), refused.reason, issuer=provider.issuer) from None
        claims = request._mcp_verified_assertion.claims
        if claims.get("client_id") != request.client.client_id:
            raise _refuse(request, "The ID-JAG was issued to another client (client_id).", "client_id")
        if not provider.allowed_clients.filter(pk=request.client.pk).exists():
            raise _refuse(request, "This identity provider's grants are not accepted from this client.", "client")
        self._check_resource(request, provider, claims)
        return provider, claims

    def _check_resource(self, request, provider, claims) -> None:
        claimed = claims.get("resource")
        if not isinstance(claimed, str) or not claimed:
            raise _refuse(request, "The ID-JAG has no resource claim.", "resource")
        try:
            resource = select_resource([claimed])
        except InvalidTarget as exc:
            raise _refuse(request, str(exc), "resource", error=errors.CustomOAuth2Error) from None
        for value in [v for k, v in (getattr(request, "decoded_body", None) or []) if k == "resource"]:
            try:
                same = select_resource([value]).uri == resource.uri
            except InvalidTarget:
                same = False
            if not same:
                raise _refuse(
                    request,
                    "The resource parameter does not name the ID-JAG's resource.",
                    "resource",
                    error=errors.CustomOAuth2Error,
                )
        if not provider.allowed_resources.filter(pk=resource.pk).exists():
            raise _refuse(request, "This identity provider's grants are not accepted for this resource.", "resource")
        if provider.organization_id is not None and resource.organization_id not in (None, provider.organization_id):
            # Organization A's IdP never vouches for a user at organization B's endpoint.
            raise _refuse(
                request,
                "This identity provider vouches for another organization: its grants are not accepted for this resource.",
                "organization",
                issuer=provider.issuer,
            )
        request._mcp_assertion_resource = resource.uri
        request._mcp_idp_organization_id = provider.organization_id or resource.organization_id

    def _scopes(self, request, provider, claims) -> list[str]:
        try:
            granted = _scope_claim(claims)
        except AssertionRefused as refused:
            raise _refuse(request, str(refused), refused.reason) from None
        requested = utils.scope_to_list(request.scope) if request.scope else None
        scopes = list(
            requested or granted or self.request_validator.get_default_scopes(request.client_id, request) or []
        )
        if granted is not None:
            scopes = [scope for scope in scopes if scope in granted]
        if provider.scope_list:
            scopes = [scope for scope in scopes if scope in provider.scope_list]
        if not scopes:
            raise errors.InvalidScopeError(
                description="None of the requested scopes is granted by the ID-JAG and the identity provider.",
                request=request,
            )
        return list(dict.fromkeys(scopes))
