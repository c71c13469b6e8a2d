"""JWT access tokens (RFC 9068): signing and strict verification, with no database and no settings.

What a resource server needs to check a token on its own: :class:`KeySet` (the authorization
server's published JWK Set, RFC 7517 §5) and :func:`verify_access_token`. A service elsewhere can
use this module with the JWK Set it fetched from the ``jwks_uri``; this site's resource server uses
it through :mod:`mcp_oauth.resource_server.jwt_tokens` (keys cached, deny-list checked).

Parsing follows RFC 8725 (JWT BCP): the header and the claims are read by the strict JSON reader
(:mod:`.strict_json`: no duplicate member, no NaN); ``alg`` must be one of :data:`ALGORITHMS`
(never ``none``, never an HMAC: a public key is not a secret) and must be the algorithm of the key
``kid`` names (§3.1); ``typ`` must be ``at+jwt`` (RFC 9068 §4, §2.1; RFC 8725 §3.11 explicit
typing: an ID token or another JWT is not an access token); ``kid`` must name a key of the set (no
key is ever taken from the token: ``jwk``, ``jku``, ``x5u``, ``x5c``, ``crit`` are refused);
the token is at most :data:`MAX_TOKEN_LENGTH` characters.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from mcp_oauth.shared.strict_json import StrictJSONError, b64url_decode, loads

__all__ = [
    "ALGORITHMS",
    "MAX_TOKEN_LENGTH",
    "TYP",
    "AccessTokenClaims",
    "InvalidAccessToken",
    "KeySet",
    "looks_like_jwt",
    "sign_access_token",
    "verify_access_token",
]

#: The signing algorithms accepted (RFC 7518 §3.4 ES256, §3.3 RS256).
ALGORITHMS: tuple[str, ...] = ("ES256", "RS256")
#: The JWS ``typ`` of an access token (RFC 9068 §2.1).
TYP = "at+jwt"
#: The longest token read, in characters (the Authorization header's own bound is 4096).
MAX_TOKEN_LENGTH = 4096
#: The header members understood; any other is refused (RFC 8725 §3.1, RFC 7515 §4.1.11 ``crit``).
_HEADER_MEMBERS = frozenset({"alg", "typ", "kid"})
#: Most keys read from one JWK Set.
MAX_KEYS = 20
_MIN_RSA_BITS = 2048

_ALGORITHM_OBJECTS = {"ES256": ECAlgorithm(ECAlgorithm.SHA256), "RS256": RSAAlgorithm(RSAAlgorithm.SHA256)}


class InvalidAccessToken(ValueError):
    """The token is not a valid access token here; ``str()`` is safe to send as
    ``error_description`` (RFC 6750 §3.1 ``invalid_token``); ``reason`` is a stable code:
    ``malformed``, ``header``, ``kid``, ``signature``, ``claims``, ``issuer``, ``audience``,
    ``expired``, ``not_yet_valid``."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has the shape of a JWS compact serialization of a JSON header
    (``eyJ``: base64url of ``{"``); an opaque token of this site never has (43 base64url characters)."""
    return token.startswith("eyJ") and token.count(".") == 2


@dataclass(frozen=True)
class VerifyingKey:
    """One published key: its ``kid``, ``alg`` and the public key object."""

    kid: str
    alg: str
    key: Any


class KeySet:
    """The verifying keys of an authorization server by ``kid``.

    :meth:`from_jwks` reads a JWK Set (RFC 7517 §5); keys with ``use`` other than ``sig``, of
    another type than EC P-256 (ES256) or RSA of at least 2048 bits (RS256), or without ``kid``
    are skipped."""

    def __init__(self, keys: Mapping[str, VerifyingKey]) -> None:
        self._keys = dict(keys)

    def __contains__(self, kid: object) -> bool:
        return kid in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, kid: str) -> VerifyingKey | None:
        return self._keys.get(kid)

    @property
    def kids(self) -> frozenset[str]:
        return frozenset(self._keys)

    @classmethod
    def from_jwks(cls, jwks: Mapping[str, Any] | str | bytes) -> KeySet:
        """The key set of a JWK Set document (a dict, or its JSON text read strictly).

        :raises ValueError: not a JWK Set (no ``keys`` list)."""
        if isinstance(jwks, str | bytes):
            jwks = loads(jwks)
        keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
        if not isinstance(keys, list):
            raise ValueError("not a JWK Set: no keys list")
        found: dict[str, VerifyingKey] = {}
        for jwk in keys[:MAX_KEYS]:
            key = _verifying_key(jwk)
            if key is not None and key.kid not in found:
                found[key.kid] = key
        return cls(found)


def _verifying_key(jwk: Any) -> VerifyingKey | None:
    if not isinstance(jwk, dict) or not isinstance(jwk.get("kid"), str) or not jwk["kid"]:
        return None
    if jwk.get("use", "sig") != "sig" or any(member in jwk for member in ("d", "p", "q", "k")):
        return None  # an encryption key, or a private or symmetric one (never published by us)
    kty, alg = jwk.get("kty"), jwk.get("alg")
    try:
        if kty == "EC" and jwk.get("crv") == "P-256" and alg in (None, "ES256"):
            return VerifyingKey(jwk["kid"], "ES256", ECAlgorithm.from_jwk(json.dumps(jwk)))
        if kty == "RSA" and alg in (None, "RS256"):
            key = RSAAlgorithm.from_jwk(json.dumps(jwk))
            if key.key_size < _MIN_RSA_BITS:
                return None
            return VerifyingKey(jwk["kid"], "RS256", key)
    except (jwt.InvalidKeyError, ValueError, TypeError, KeyError):
        return None
    return None


@dataclass(frozen=True)
class AccessTokenClaims:
    """The verified claims of a JWT access token (RFC 9068 §2.2): ``claims`` as sent."""

    claims: dict[str, Any]
    kid: str

    @property
    def issuer(self) -> str:
        return self.claims["iss"]

    @property
    def subject(self) -> str:
        return self.claims["sub"]

    @property
    def client_id(self) -> str:
        return self.claims["client_id"]

    @property
    def jti(self) -> str:
        return self.claims["jti"]

    @property
    def scope(self) -> str:
        return self.claims.get("scope", "")

    @property
    def expires_at(self) -> int:
        return self.claims["exp"]

    @property
    def issued_at(self) -> int:
        return self.claims["iat"]

    @property
    def jkt(self) -> str | None:
        """``cnf.jkt``: the thumbprint of the DPoP key the token is bound to (RFC 9449 §6.1)."""
        cnf = self.claims.get("cnf")
        return cnf.get("jkt") if isinstance(cnf, dict) else None

    @property
    def actor(self) -> dict[str, Any] | None:
        """``act`` (RFC 8693 §4.1): who acts for the subject, or None."""
        act = self.claims.get("act")
        return act if isinstance(act, dict) else None


def sign_access_token(claims: Mapping[str, Any], *, private_key: Any, kid: str, alg: str) -> str:
    """The JWS compact serialization of ``claims`` with the header ``{"alg", "typ": "at+jwt", "kid"}``.

    :raises ValueError: ``alg`` is not one of :data:`ALGORITHMS`."""
    if alg not in ALGORITHMS:
        raise ValueError(f"unsupported access-token algorithm {alg!r}")
    return jwt.encode(dict(claims), private_key, algorithm=alg, headers={"kid": kid, "typ": TYP})


def _segment_json(segment: str, what: str) -> dict[str, Any]:
    try:
        value = loads(b64url_decode(segment))
    except StrictJSONError:
        raise InvalidAccessToken(f"The access token's {what} is not strict base64url JSON.", "malformed") from None
    if not isinstance(value, dict):
        raise InvalidAccessToken(f"The access token's {what} is not a JSON object.", "malformed")
    return value


def _int(value: Any) -> bool:
    return type(value) is int


def verify_access_token(
    token: str,
    *,
    keys: KeySet,
    issuer: str,
    audience: str,
    now: float | None = None,
    leeway: int = 0,
) -> AccessTokenClaims:
    """The claims of ``token`` once every check passed (see the module's docstring).

    :param audience: the resource being served (its canonical URI): ``aud`` must be it, or a
        list of it alone (RFC 9068 §4, RFC 8707).
    :param leeway: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``.
    :raises InvalidAccessToken: any failed check, first the token's shape and header, then the
        signature, then the claims (``iss``, ``aud``, ``exp``, ``nbf``, ``iat``, and ``sub``,
        ``client_id``, ``jti`` present as strings).
    """
    if not isinstance(token, str) or len(token) > MAX_TOKEN_LENGTH or token.count(".") != 2:
        raise InvalidAccessToken("The access token is not a JWT.", "malformed")
    head, body, signature = token.split(".")
    header = _segment_json(head, "header")
    if set(header) - _HEADER_MEMBERS:
        raise InvalidAccessToken("The access token's header has members this server does not accept.", "header")
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise InvalidAccessToken("The access token's algorithm is not accepted.", "header")
    typ = header.get("typ")
    if not isinstance(typ, str) or typ.lower() not in (TYP, "application/" + TYP):
        raise InvalidAccessToken("The JWT is not an access token (typ at+jwt).", "header")
    kid = header.get("kid")
    key = keys.get(kid) if isinstance(kid, str) else None
    if key is None:
        raise InvalidAccessToken("The access token is signed with an unknown key.", "kid")
    if key.alg != alg:
        raise InvalidAccessToken("The access token's algorithm is not its key's.", "header")
    try:
        raw_signature = b64url_decode(signature)
    except StrictJSONError:
        raise InvalidAccessToken("The access token's signature is not base64url.", "malformed") from None
    if not _ALGORITHM_OBJECTS[alg].verify(f"{head}.{body}".encode("ascii"), key.key, raw_signature):
        raise InvalidAccessToken("The access token's signature is invalid.", "signature")
    claims = _segment_json(body, "claims")
    for name in ("sub", "client_id", "jti", "iss"):
        if not isinstance(claims.get(name), str) or not claims[name]:
            raise InvalidAccessToken(f"The access token has no {name}.", "claims")
    if "scope" in claims and not isinstance(claims["scope"], str):
        raise InvalidAccessToken("The access token's scope is not a string.", "claims")
    if claims["iss"] != issuer:
        raise InvalidAccessToken("The access token was issued by another authorization server.", "issuer")
    aud = claims.get("aud")
    if aud != audience and aud != [audience]:
        raise InvalidAccessToken("The access token was not issued for this resource.", "audience")
    exp, iat, nbf = claims.get("exp"), claims.get("iat"), claims.get("nbf", None)
    if not _int(exp) or not _int(iat) or (nbf is not None and not _int(nbf)):
        raise InvalidAccessToken("The access token's exp, iat or nbf is not an integer.", "claims")
    assert isinstance(exp, int) and isinstance(iat, int)
    current = time.time() if now is None else now
    if exp <= current - leeway:
        raise InvalidAccessToken("The access token has expired.", "expired")
    if iat > current + leeway or (nbf is not None and nbf > current + leeway):
        raise InvalidAccessToken("The access token is not valid yet.", "not_yet_valid")
    cnf = claims.get("cnf")
    if cnf is not None and (not isinstance(cnf, dict) or not isinstance(cnf.get("jkt"), str)):
        raise InvalidAccessToken("The access token's cnf is not a key thumbprint.", "claims")
    return AccessTokenClaims(claims=claims, kid=key.kid)
