"""DPoP at the resource server (RFC 9449 §7): ``Authorization: DPoP <token>`` with a ``DPoP`` proof.

:func:`check_request` (the thread path of :func:`~mcp_oauth.resource_server.authentication.authenticate_bearer`)
and :func:`lane_proof` / :func:`lane_binding_ok` (the event-loop path,
:func:`~mcp_oauth.resource_server.authentication.authenticate_bearer_cached`, which records the
``jti`` in the same round trip as its token lookup) check:

* a DPoP-bound token (``cnf.jkt``) sent with the ``Bearer`` scheme: refused (§7.2);
* a bearer token at a resource that requires DPoP (``ProtectedResource.dpop_required``): refused;
* the ``DPoP`` scheme with a token that is not bound: refused;
* the proof (:func:`~.proof.verify_proof`: ``htm`` = the method, ``htu`` = the request URL,
  ``ath`` = the token's hash, ``iat`` window, nonce when ``DPOP_NONCE_REQUIRED``) made with
  the key the token is bound to, its ``jti`` not seen before on any worker (:mod:`.replay`).

A Bearer request for a token that is not bound, at a resource that does not require DPoP,
costs one dict lookup.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from mcp_oauth.dpop.bindings import JKT_ATTRIBUTE, bound_jkt
from mcp_oauth.dpop.nonce import new_nonce
from mcp_oauth.dpop.proof import DPoPProof, InvalidDPoPProof, UseDPoPNonce, supported_algorithms, verify_proof
from mcp_oauth.dpop.replay import remember_jti
from mcp_oauth.dpop.request_urls import canonical_url, request_urls
from mcp_oauth.models import ProtectedResource

__all__ = [
    "DPoPRefusal",
    "check_request",
    "dpop_token_from_header",
    "lane_binding_ok",
    "lane_proof",
    "mark_recorded",
]

#: RFC 9449 §7.1 token68 characters.
_TOKEN68_CHARS = re.compile(r"[A-Za-z0-9\-._~+/]+=*")


@dataclass
class DPoPRefusal(Exception):
    """A DPoP refusal: 401 with ``error`` (``invalid_token``, ``invalid_dpop_proof`` or
    ``use_dpop_nonce``) in a ``WWW-Authenticate: DPoP`` challenge; ``nonce``: the ``DPoP-Nonce``
    to send (``use_dpop_nonce``)."""

    error: str
    description: str
    nonce: str | None = None

    def __post_init__(self) -> None:
        super().__init__(self.description)


def dpop_token_from_header(value: str | None) -> str | None:
    """The token of an ``Authorization: DPoP <token>`` header value (scheme case-insensitive).

    :returns: None when the header is absent, uses another scheme, or DPoP is off.
    :raises ValueError: the DPoP credentials are malformed (empty, spaces, non-token68 characters).
    """
    if not value or value[:5].lower() != "dpop " or not supported_algorithms():
        return None
    token = value[5:].strip()
    if len(token) > 4096 or not _TOKEN68_CHARS.fullmatch(token):
        raise ValueError("malformed DPoP token")
    return token


def _proof(
    request: HttpRequest, resource: ProtectedResource, token: str, jkt: str | None, used_dpop: bool
) -> DPoPProof | None:
    """The checked proof of a DPoP request; None for a Bearer request that needs none.

    :raises DPoPRefusal: see the module docstring.
    """
    if not used_dpop:
        if jkt:
            raise DPoPRefusal(
                "invalid_token", "The access token is DPoP-bound: send it with the DPoP scheme and a DPoP proof."
            )
        if resource.dpop_required and supported_algorithms():
            raise DPoPRefusal("invalid_token", "This resource accepts only DPoP-bound access tokens.")
        return None
    if not jkt:
        raise DPoPRefusal("invalid_token", "The access token is not DPoP-bound: send it with the Bearer scheme.")
    try:
        proof = verify_proof(
            request.headers.get("DPoP"),
            method=request.method or "",
            urls=canonical_url(request),
            more_urls=lambda: request_urls(request),
            access_token=token,
        )
    except InvalidDPoPProof as exc:
        raise DPoPRefusal("invalid_dpop_proof", str(exc)) from None
    except UseDPoPNonce as exc:
        raise DPoPRefusal("use_dpop_nonce", str(exc), nonce=new_nonce()) from None
    if proof.jkt != jkt:
        raise DPoPRefusal(
            "invalid_dpop_proof", "The DPoP proof is not signed with the key the access token is bound to."
        )
    return proof


#: The request attribute naming the proof whose ``jti`` the event-loop path recorded itself.
RECORDED_ATTRIBUTE = "_mcp_dpop_recorded"


def check_request(
    request: HttpRequest, resource: ProtectedResource, token: str, access_token: Any, used_dpop: bool
) -> None:
    """The DPoP checks of a request whose token passed every other check (may read the database
    once for a token loaded without its binding, and writes the ``jti`` to the shared cache,
    unless this very request's event-loop path recorded it already: :func:`lane_proof`).

    :param used_dpop: the request used the ``DPoP`` scheme.
    :raises DPoPRefusal: see the module docstring.
    """
    proof = _proof(request, resource, token, bound_jkt(access_token), used_dpop)
    if proof is None or getattr(request, RECORDED_ATTRIBUTE, None) == (proof.jkt, proof.jti):
        return
    if not remember_jti(proof.jkt, proof.jti):
        raise DPoPRefusal("invalid_dpop_proof", "The DPoP proof was used before (jti).")


def lane_proof(request: HttpRequest, token: str) -> DPoPProof | None:
    """The event-loop path's check of a DPoP request's proof by itself (no I/O), before its token
    is looked up: the proof, or None when it fails (the thread path then gives the exact error).

    The caller records the proof's ``jti`` together with the token lookup, in one round trip
    (:func:`~mcp_oauth.resource_server.cache.aadd_and_get_many`), and then calls
    :func:`mark_recorded`: a request that goes on to the thread path is not refused as its own replay.
    """
    try:
        return verify_proof(
            request.headers.get("DPoP"),
            method=request.method or "",
            urls=canonical_url(request),
            more_urls=lambda: request_urls(request),
            access_token=token,
        )
    except (InvalidDPoPProof, UseDPoPNonce):
        return None


def mark_recorded(request: HttpRequest, proof: DPoPProof) -> None:
    """Note on ``request`` that its proof's ``jti`` was recorded by this request (:func:`lane_proof`)."""
    setattr(request, RECORDED_ATTRIBUTE, (proof.jkt, proof.jti))


def lane_binding_ok(resource: ProtectedResource, access_token: Any, proof: DPoPProof | None) -> bool:
    """The event-loop path's binding check of a token from the token cache: True when a Bearer
    request (``proof`` None) carries an unbound token for a resource that accepts bearer tokens,
    or a DPoP request's proof is signed with the key the token is bound to. False (the thread
    path decides) in every other case, and for a cache entry loaded without its binding."""
    values = access_token.__dict__
    if JKT_ATTRIBUTE not in values:
        return False
    jkt = values[JKT_ATTRIBUTE] or None
    if proof is None:
        return jkt is None and not (resource.dpop_required and supported_algorithms())
    return jkt is not None and proof.jkt == jkt
