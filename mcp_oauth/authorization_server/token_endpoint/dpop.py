"""DPoP at the token endpoint (RFC 9449 §5).

:func:`token_request_proof` (the token view) checks the ``DPoP`` header of a token request and
keeps the proof for the request's duration; :func:`bind_grant` (the request validator, before
any token row is written) turns the grant into a DPoP one:

* a valid proof: ``token_type`` is ``DPoP`` (§5.1) and the access token is bound to the proof's
  key (``cnf.jkt``, §6.1), as is the refresh token of a public client (§5.4);
* no proof, from a client that registered ``dpop_bound_access_tokens: true`` or for a resource
  that requires DPoP: ``invalid_dpop_proof`` (§5.2);
* a refresh token bound to a key, presented without a proof of that key: ``invalid_grant`` (§5.4).

A proof that fails a check is ``invalid_dpop_proof`` (400); a missing or stale nonce, when
``DPOP_NONCE_REQUIRED``, is ``use_dpop_nonce`` (400) with a fresh ``DPoP-Nonce`` header (§8).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.authorization_server.token_endpoint.dpop_requirements import client_requires_dpop, resources_require_dpop
from mcp_oauth.dpop.bindings import bind_tokens, refresh_token_jkt
from mcp_oauth.dpop.nonce import new_nonce
from mcp_oauth.dpop.proof import DPoPProof, InvalidDPoPProof, UseDPoPNonce, supported_algorithms, verify_proof
from mcp_oauth.dpop.replay import remember_jti
from mcp_oauth.dpop.request_urls import canonical_url, request_urls
from mcp_oauth.errors import OAuthError
from mcp_oauth.models import DPoPBinding

__all__ = ["bind_grant", "check_token_request", "current_proof", "token_request_proof"]

_proof: ContextVar[DPoPProof | None] = ContextVar("mcp_oauth_dpop_proof", default=None)


def check_token_request(request: HttpRequest) -> DPoPProof | None:
    """The checked DPoP proof of a token request, or None when it carries none (or DPoP is off).

    :raises OAuthError: 400 ``invalid_dpop_proof`` (a check of RFC 9449 §4.3 failed, or the
        ``jti`` was seen before), 400 ``use_dpop_nonce`` with ``DPoP-Nonce``.
    """
    header = request.headers.get("DPoP")
    if header is None or not supported_algorithms():
        return None
    try:
        proof = verify_proof(
            header, method=request.method or "", urls=canonical_url(request), more_urls=lambda: request_urls(request)
        )
    except InvalidDPoPProof as exc:
        raise OAuthError("invalid_dpop_proof", str(exc)) from None
    except UseDPoPNonce as exc:
        raise OAuthError("use_dpop_nonce", str(exc), headers={"DPoP-Nonce": new_nonce()}) from None
    if not remember_jti(proof.jkt, proof.jti):
        raise OAuthError("invalid_dpop_proof", "The DPoP proof was used before (jti).")
    return proof


@contextmanager
def token_request_proof(request: HttpRequest) -> Iterator[DPoPProof | None]:
    """Check the request's proof (:func:`check_token_request`) and make it :func:`current_proof`
    while the grant is processed."""
    token = _proof.set(check_token_request(request))
    try:
        yield _proof.get()
    finally:
        _proof.reset(token)


def current_proof() -> DPoPProof | None:
    """The proof of the token request being processed (None: none)."""
    return _proof.get()


def _refused(description: str) -> errors.CustomOAuth2Error:
    return errors.CustomOAuth2Error(error="invalid_dpop_proof", description=description, status_code=400)


def bind_grant(token: dict[str, Any], request: Any, resources: Callable[[], list[str]]) -> None:
    """Make the grant of ``request`` (oauthlib's request, client authenticated, tokens drawn but
    not saved) a DPoP grant when it carries a proof; enforce the client's and the resource's DPoP
    requirement and the refresh token's binding.

    :param resources: the (canonical) resource URIs the grant's tokens will be bound to (RFC 8707),
        called only for a grant without a proof.
    :param token: oauthlib's token response (``access_token``, ``expires_in``, ``refresh_token``?);
        its ``token_type`` becomes ``DPoP``.
    :raises oauthlib.oauth2.rfc6749.errors.OAuth2Error: ``invalid_grant`` (a bound refresh token
        without a proof of its key), ``invalid_dpop_proof`` (no proof where one is required).
    """
    if not supported_algorithms():
        return
    proof = _proof.get()
    client = request.client
    if request.grant_type == "refresh_token" and getattr(request, "refresh_token", None):
        bound = refresh_token_jkt(request.refresh_token)
        if bound is not None and (proof is None or proof.jkt != bound):
            raise errors.InvalidGrantError(
                description="The refresh token is bound to a DPoP key: send a DPoP proof made with it.",
                request=request,
            )
    if proof is None:
        if client_requires_dpop(client):
            raise _refused("This client uses DPoP-bound access tokens: send a DPoP proof.")
        if resources_require_dpop(resources()):
            raise _refused("The resource accepts only DPoP-bound access tokens: send a DPoP proof.")
        return
    token["token_type"] = "DPoP"
    now = timezone.now()
    bindings: list[tuple[str, str, datetime | None]] = [
        (token["access_token"], DPoPBinding.Kind.ACCESS_TOKEN, now + timedelta(seconds=token["expires_in"]))
    ]
    if token.get("refresh_token") and getattr(client, "client_type", None) == "public":
        lifetime = oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS
        if isinstance(lifetime, (int, float)):
            lifetime = timedelta(seconds=lifetime)
        expires = now + lifetime if lifetime else None
        bindings.append((token["refresh_token"], DPoPBinding.Kind.REFRESH_TOKEN, expires))
    bind_tokens(proof.jkt, bindings)
