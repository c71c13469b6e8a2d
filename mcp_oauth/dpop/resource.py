"""DPoP at the resource server (RFC 9449 §7): ``Authorization: DPoP <token>`` with a ``DPoP`` proof.

:func:`check_request` (the thread path of :func:`~mcp_oauth.resource_server.authentication.authenticate_bearer`)
and :func:`acheck_request` (the event-loop path, :func:`~mcp_oauth.resource_server.authentication.authenticate_bearer_cached`)
run, after every check of the token itself:

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

from ..models import ProtectedResource
from .bindings import JKT_ATTRIBUTE, bound_jkt
from .nonce import new_nonce
from .proof import DPoPProof, InvalidDPoPProof, UseDPoPNonce, supported_algorithms, verify_proof
from .replay import aremember_jti, remember_jti
from .request_urls import canonical_url, request_urls

__all__ = ["DPoPRefusal", "acheck_request", "check_request", "dpop_token_from_header"]

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


def check_request(
    request: HttpRequest, resource: ProtectedResource, token: str, access_token: Any, used_dpop: bool
) -> None:
    """The DPoP checks of a request whose token passed every other check (may read the database
    once for a token loaded without its binding, and writes the ``jti`` to the shared cache).

    :param used_dpop: the request used the ``DPoP`` scheme.
    :raises DPoPRefusal: see the module docstring.
    """
    proof = _proof(request, resource, token, bound_jkt(access_token), used_dpop)
    if proof is not None and not remember_jti(proof.jkt, proof.jti):
        raise DPoPRefusal("invalid_dpop_proof", "The DPoP proof was used before (jti).")


async def acheck_request(
    request: HttpRequest, resource: ProtectedResource, token: str, access_token: Any, used_dpop: bool
) -> bool:
    """:func:`check_request` from the event loop, for a token from the token cache.

    :returns: True when every check passed (the ``jti`` is then recorded); False when the thread
        path must decide (a refusal, a token entry without its binding, a cache that cannot be
        written from the event loop). False never records the ``jti``, so the thread path sees
        the proof as new, unless it was a replay, which it then refuses too.
    """
    if JKT_ATTRIBUTE not in access_token.__dict__:
        return False
    try:
        proof = _proof(request, resource, token, access_token.__dict__[JKT_ATTRIBUTE] or None, used_dpop)
    except DPoPRefusal:
        return False
    if proof is None:
        return True
    return bool(await aremember_jti(proof.jkt, proof.jti))
