"""The RFC 8693 token exchange grant at the token endpoint.

``grant_type=urn:ietf:params:oauth:grant-type:token-exchange`` with ``subject_token`` (an access
token this server issued, ``subject_token_type=urn:ietf:params:oauth:token-type:access_token``),
optionally ``resource`` / ``audience`` (one protected resource of this server, RFC 8707; both
name the same one), ``scope`` and ``requested_token_type`` (only the access-token type). Two uses:

* **down-scoping**: a token for the subject token's own resource, with fewer scopes and/or a
  shorter life;
* **delegation** ("on behalf of"): a token for *another* protected resource of this server, carrying
  the RFC 8693 §4.1 ``act`` claim ``{"sub": "<the exchanging client's client_id>"}`` (the subject
  token's own ``act`` nested inside, §4.1), stored for opaque tokens as a
  :class:`~mcp_oauth.models.TokenActor` row (:mod:`.actor`).

Never a wider token than the subject token: its scopes ⊆ the subject's (else ``invalid_scope``),
its expiry ≤ the subject's, the same user and the same organization (a resource of another
organization is ``invalid_target``); the subject token must have been issued to the exchanging
client (else ``invalid_grant``), be live (``invalid_grant``), and, when DPoP-bound, the request must
carry a DPoP proof of the same key (``invalid_grant``): the new token is bound to it. Then the
adapter decides (:meth:`~mcp_oauth.adapter.DefaultMCPAdapter.token_exchange_decision`, refused by
default with ``unauthorized_client``). ``actor_token`` is not supported (``invalid_request``). No
refresh token is issued: the client exchanges its subject token again.

Errors (RFC 6749 §5.2, RFC 8693 §2.2.2), each audited as ``token.exchange_refused`` but
``invalid_client``: ``invalid_request``, ``invalid_client``, ``unauthorized_client``,
``invalid_grant``, ``invalid_scope``, ``invalid_target``. The issued token's ``token.issued`` event
carries ``subject_token_id`` and ``act``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from django.utils import timezone
from oauth2_provider.models import get_access_token_model
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors, utils
from oauthlib.oauth2.rfc6749.grant_types import ClientCredentialsGrant
from oauthlib.oauth2.rfc6749.tokens import BearerToken

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.token_endpoint.dpop import current_proof
from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.authorization_server.token_exchange.decision import (
    ACCESS_TOKEN_TYPE,
    TOKEN_EXCHANGE_GRANT_TYPE,
    TokenExchangeDecision,
)
from mcp_oauth.dpop.bindings import bound_jkt
from mcp_oauth.models import AuditEvent, TokenActor, TokenOrganization
from mcp_oauth.resource_server.cache import token_checksum
from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["TokenExchangeGrant"]

#: Parameters that may appear once at most (the form guard refuses repeats over HTTP too).
_SINGLE = (
    "grant_type",
    "scope",
    "subject_token",
    "subject_token_type",
    "requested_token_type",
    "audience",
    "actor_token",
    "actor_token_type",
)


#: Characters RFC 6749 §5.2 allows in ``error_description`` (%x20-21 / %x23-5B / %x5D-7E), and its longest form here.
_DESCRIPTION_CHARACTERS = re.compile(r"[^\x20\x21\x23-\x5b\x5d-\x7e]")
MAX_DESCRIPTION = 200


def _description(text: str) -> str:
    """``text`` as an ``error_description``: a character outside RFC 6749 §5.2's set (a quote, a
    backslash, a control or non-ASCII character, as a client's value may hold) is ``?``; cut at
    :data:`MAX_DESCRIPTION` characters."""
    text = _DESCRIPTION_CHARACTERS.sub("?", text)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 3] + "..."


def _refusal(request: Any, error: str, description: str) -> errors.OAuth2Error:
    """The OAuth error ``error`` (an RFC 6749 §5.2 / RFC 8693 §2.2.2 code), audited; ``description``
    made an RFC 6749 §5.2 ``error_description`` (:func:`_description`)."""
    description = _description(description)
    client = getattr(request, "client", None)
    record(
        AuditEvent.Kind.TOKEN_EXCHANGE_REFUSED,
        request=request,
        user=getattr(request, "_mcp_exchange_user", None),
        client_id=getattr(client, "client_id", "") or "",
        detail={"error": error, "description": description},
    )
    kinds = {
        "invalid_request": errors.InvalidRequestError,
        "invalid_grant": errors.InvalidGrantError,
        "invalid_scope": errors.InvalidScopeError,
        "unauthorized_client": errors.UnauthorizedClientError,
    }
    kind = kinds.get(error)
    if kind is not None:
        return kind(description=description, request=request)
    return errors.CustomOAuth2Error(error=error, description=description, request=request)


def _param(request: Any, name: str) -> str | None:
    value = getattr(request, name, None)
    return value if isinstance(value, str) and value != "" else None


class _CappedLifetime:
    """oauthlib's token handler whose access-token lifetime is at most ``cap`` seconds (the subject
    token's remaining life): oauthlib sets ``request.expires_in`` from it before the token generator
    runs, so a generated JWT's ``exp`` is capped too."""

    def __init__(self, handler: BearerToken, cap: int) -> None:
        self.handler = handler
        self.cap = cap

    def create_token(self, request: Any, refresh_token: bool = False, **kwargs: Any) -> dict[str, Any]:
        handler = self.handler
        lifetime = handler.expires_in(request) if callable(handler.expires_in) else handler.expires_in
        capped = BearerToken(
            handler.request_validator,
            handler.token_generator,
            min(int(lifetime), self.cap),
            handler.refresh_token_generator,
        )
        return capped.create_token(request, refresh_token=False, **kwargs)


class TokenExchangeGrant(ClientCredentialsGrant):
    """oauthlib grant handler of ``urn:ietf:params:oauth:grant-type:token-exchange`` (token endpoint only).

    ``create_token_response`` is the client-credentials one (no refresh token, saved through the
    request validator), its lifetime capped by the subject token's, with ``issued_token_type``.
    """

    def __init__(self, request_validator=None, **kwargs: Any) -> None:
        super().__init__(request_validator, **kwargs)
        self.register_token_modifier(self._issued_token_type)

    @staticmethod
    def _issued_token_type(token: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        token["issued_token_type"] = ACCESS_TOKEN_TYPE  # RFC 8693 §2.2.1: REQUIRED
        return token

    def create_token_response(self, request, token_handler):
        """The client-credentials response, the access token living no longer than the subject token."""
        cap = getattr(request, "_mcp_exchange_cap", None)
        if cap is not None:
            token_handler = _CappedLifetime(token_handler, cap)
        return super().create_token_response(request, token_handler)

    def validate_token_request(self, request) -> None:
        """Check the parameters, the client, the subject token, the target and the scopes; ask the adapter.

        Sets ``request.user``, ``request.scopes``, ``request.mcp_act`` (delegation only; the
        contract with JWT access tokens), ``request._mcp_assertion_resource`` (the target resource,
        read by the validator's resource selection), ``request._mcp_subject_organization_id``,
        ``request._mcp_exchange_cap`` and ``request._mcp_grant_detail``.

        :raises OAuth2Error: ``invalid_request``, ``invalid_client``, ``unauthorized_client``,
            ``invalid_grant``, ``invalid_scope``, ``invalid_target`` (RFC 6749 §5.2, RFC 8693 §2.2.2).
        """
        for validator in self.custom_validators.pre_token:
            validator(request)
        if request.grant_type != TOKEN_EXCHANGE_GRANT_TYPE or not mcp_oauth_settings.TOKEN_EXCHANGE:
            raise errors.UnsupportedGrantTypeError(request=request)
        for param in _SINGLE:
            if param in request.duplicate_params:
                raise errors.InvalidRequestError(description=f"Duplicate {param} parameter.", request=request)
        self.validate_client_authentication(request)
        if not self.request_validator.validate_grant_type(
            request.client_id, request.grant_type, request.client, request
        ):
            raise _refusal(request, "unauthorized_client", "This client may not use token exchange.")
        self._check_parameters(request)
        subject = self._subject_token(request)
        resource = self._target(request, subject)
        request.scopes = self._scopes(request, subject, resource)
        if not self.request_validator.validate_scopes(request.client_id, request.scopes, request.client, request):
            raise _refusal(request, "invalid_scope", "The client may not ask for these scopes.")
        decision = mcp_oauth_settings.adapter.token_exchange_decision(
            request, request.client, subject, resource, list(request.scopes)
        )
        if not isinstance(decision, TokenExchangeDecision) or not decision.allowed:
            error = getattr(decision, "error", "") or "unauthorized_client"
            if error not in ("unauthorized_client", "invalid_target", "invalid_scope", "invalid_grant"):
                error = "unauthorized_client"
            raise _refusal(
                request, error, getattr(decision, "description", "") or "This token exchange is not allowed."
            )
        request.user = subject.user
        delegated = resource.uri not in list(subject.resource or [])
        detail: dict[str, Any] = {"subject_token_id": subject.pk, "delegated": delegated}
        if delegated:
            act: dict[str, Any] = {"sub": request.client.client_id}
            prior = getattr(subject, "_mcp_subject_act", None)
            if prior:
                act["act"] = prior
            request.mcp_act = act
            detail["act"] = act
        request._mcp_exchange_subject = subject
        request._mcp_grant_detail = detail
        for validator in self.custom_validators.post_token:
            validator(request)

    # --- the steps -------------------------------------------------------------------------

    def _check_parameters(self, request) -> None:
        subject_token = _param(request, "subject_token")
        subject_type = _param(request, "subject_token_type")
        if subject_token is None or subject_type is None:
            raise _refusal(request, "invalid_request", "subject_token and subject_token_type are required.")
        if subject_type != ACCESS_TOKEN_TYPE:
            raise _refusal(
                request, "invalid_request", f"Only subject tokens of type {ACCESS_TOKEN_TYPE} are exchanged here."
            )
        requested = _param(request, "requested_token_type")
        if requested is not None and requested != ACCESS_TOKEN_TYPE:
            raise _refusal(request, "invalid_request", f"Only {ACCESS_TOKEN_TYPE} tokens are issued here.")
        if _param(request, "actor_token") is not None or _param(request, "actor_token_type") is not None:
            raise _refusal(request, "invalid_request", "actor_token is not supported by this server.")

    def _subject_token(self, request):
        """The live access token named by ``subject_token``, issued to this client.

        :raises OAuth2Error: ``invalid_grant`` (unknown, expired, revoked, another client's, a
            registration token, an inactive user, a DPoP-bound token without a proof of its key).
        """
        checksum = token_checksum(request.subject_token)
        subject = (
            get_access_token_model()
            .objects.select_related("application", "user")
            .filter(token_checksum=checksum)
            .first()
        )
        if subject is None or subject.scope == oauth2_settings.DCR_REGISTRATION_SCOPE:
            raise _refusal(request, "invalid_grant", "The subject token is not a valid access token of this server.")
        request._mcp_exchange_user = subject.user if getattr(subject.user, "pk", None) else None
        if subject.application_id != request.client.pk:
            raise _refusal(request, "invalid_grant", "The subject token was issued to another client.")
        now = timezone.now()
        if not isinstance(subject.expires, datetime) or subject.expires <= now:
            raise _refusal(request, "invalid_grant", "The subject token has expired.")
        remaining = int((subject.expires - now).total_seconds())
        if remaining < 1:
            raise _refusal(request, "invalid_grant", "The subject token has expired.")
        if subject.user_id is not None and not getattr(subject.user, "is_active", False):
            raise _refusal(request, "invalid_grant", "The subject token's user is inactive.")
        jkt = bound_jkt(subject)
        if jkt is not None:
            proof = current_proof()
            if proof is None or proof.jkt != jkt:
                raise _refusal(
                    request,
                    "invalid_grant",
                    "The subject token is bound to a DPoP key: send a DPoP proof made with it.",
                )
        request._mcp_exchange_cap = remaining
        request._mcp_subject_organization_id = (
            TokenOrganization.objects.filter(token_checksum=checksum, token_kind=TokenOrganization.Kind.ACCESS_TOKEN)
            .values_list("organization_id", flat=True)
            .first()
        )
        subject.__dict__["_mcp_subject_act"] = (
            TokenActor.objects.filter(token_checksum=checksum).values_list("act", flat=True).first()
        )
        return subject

    def _target(self, request, subject):
        """The resource the new token is for: ``resource`` and ``audience`` (the same one when both
        are sent), else the subject token's own.

        :raises OAuth2Error: ``invalid_target`` (not a resource of this server, several, or one of
            another organization than the subject token's).
        """
        values = [v for k, v in (getattr(request, "decoded_body", None) or []) if k == "resource" and v != ""]
        audience = _param(request, "audience")
        try:
            if audience is not None:
                target = select_resource([audience])
                if values and any(select_resource([value]).uri != target.uri for value in values):
                    raise InvalidTarget("The resource and audience parameters name different resources.")
                if len(values) > 1:
                    select_resource(values)  # refused: one resource per token
            elif values:
                target = select_resource(values)
            else:
                own = list(subject.resource or [])
                if len(own) != 1:
                    raise InvalidTarget("Name the resource the new token is for.")
                target = select_resource(own)
        except InvalidTarget as exc:
            raise _refusal(request, "invalid_target", str(exc)) from None
        subject_organization = request._mcp_subject_organization_id
        own_resource_organization = None
        for uri in subject.resource or []:
            try:
                own_resource_organization = select_resource([uri]).organization_id
            except InvalidTarget:
                continue
        bound = subject_organization if subject_organization is not None else own_resource_organization
        if target.organization_id is not None and target.organization_id != bound:
            raise _refusal(request, "invalid_target", "The resource belongs to another organization.")
        request._mcp_subject_organization_id = bound
        request._mcp_assertion_resource = target.uri
        return target

    def _scopes(self, request, subject, resource) -> list[str]:
        """The requested scopes (each one of the subject token's, else ``invalid_scope``), or, when
        none is asked, the subject token's scopes the resource serves."""
        granted = subject.scope.split()
        if request.scope:
            requested = list(dict.fromkeys(utils.scope_to_list(request.scope)))
            wider = [scope for scope in requested if scope not in granted]
            if wider:
                raise _refusal(
                    request, "invalid_scope", "The subject token does not grant: " + " ".join(sorted(wider)) + "."
                )
            return requested
        served = resource.scope_list
        scopes = [scope for scope in granted if not served or scope in served]
        if not scopes:
            raise _refusal(request, "invalid_scope", "None of the subject token's scopes is served by the resource.")
        return scopes
