"""Verification of signed JWT assertions (RFC 7523 §3, RFC 7521 §5.2, RFC 8725), shared by
``private_key_jwt`` client authentication (:mod:`.client_assertion`) and ID-JAG grants (:mod:`.jwt_bearer`).

:func:`verify_assertion` checks, in this order, and raises :class:`AssertionRefused` at the first
failure (the caller turns it into ``invalid_client`` or ``invalid_grant``):

0. header and claims read by the strict reader (:func:`unverified`,
   :mod:`mcp_oauth.shared.strict_json`): strict JSON (no ``NaN``/``Infinity``, no duplicate member;
   RFC 8259 §4, §6, RFC 7515 §5.2), no NUL or control character in an identifier claim, numeric
   dates finite and between 1970 and 9999; these objects, not PyJWT's own parse, are checked below;
1. a compact JWS of three parts whose header names an algorithm in both the caller's list and
   ``MCP_OAUTH["ASSERTION_ALGORITHMS"]``; ``none`` and HS* are refused whatever the lists say
   (RFC 8725 §3.1, §3.2), so a token "signed" with the public key as an HMAC secret never verifies;
2. the ``typ`` header when the caller requires one (RFC 8725 §3.11), compared case-insensitively
   with or without the ``application/`` prefix (RFC 7515 §4.1.9);
3. the signature, with the signer's key of that ``kid`` (or each key of a matching type when the
   header has no ``kid``), through PyJWT's JWS layer (``b64`` / ``crit`` headers refused);
4. ``iss`` / ``sub`` when the caller fixes them; ``aud`` — a string, or an array of strings every
   one of which is an accepted audience;
5. ``exp`` required, a number, in the future and at most ``ASSERTION_MAX_LIFETIME_SECONDS`` away;
   ``nbf`` not in the future; ``iat`` (required when the caller says so) not in the future and not
   older than the maximum lifetime; all within ``ASSERTION_CLOCK_SKEW_SECONDS``;
6. ``jti`` required, a non-empty string of at most 255 characters.

:func:`remember_jti` then records ``iss`` + ``jti`` in :class:`~mcp_oauth.models.UsedAssertion`
(unique key): the second use anywhere — another request, worker or process — is refused.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from django.db import IntegrityError, router, transaction
from django.utils import timezone

from mcp_oauth.models import UsedAssertion
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.strict_json import StrictJSONError, jose_object, numeric_date

#: Never accepted, whatever the settings list (RFC 8725 §3.1: no "none"; §3.2: no shared-secret
#: algorithms for a key that is public).
FORBIDDEN_ALGORITHMS = frozenset({"none", "HS256", "HS384", "HS512"})

#: The JWK key type each accepted algorithm needs (RFC 7518 §3.1, RFC 8037 §3.1).
KEY_TYPES = {
    "RS256": "RSA",
    "RS384": "RSA",
    "RS512": "RSA",
    "PS256": "RSA",
    "PS384": "RSA",
    "PS512": "RSA",
    "ES256": "EC",
    "ES384": "EC",
    "ES512": "EC",
    "EdDSA": "OKP",
}
MAX_JTI_LENGTH = 255


class AssertionRefused(Exception):
    """An assertion failed a check. ``str()`` is safe to send as ``error_description``;
    ``reason`` is a stable code for the audit log (``alg``, ``typ``, ``signature``, ``aud``,
    ``exp``, ``jti``, ``replay``, ...)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Verified:
    """A verified assertion: its ``header``, its ``claims`` and the ``exp`` as a datetime."""

    header: dict[str, Any]
    claims: dict[str, Any]
    expires_at: datetime = field(compare=False)


def accepted_algorithms(allowed: Iterable[str] | None = None) -> frozenset[str]:
    """``allowed`` (all of ``ASSERTION_ALGORITHMS`` when None) ∩ ``ASSERTION_ALGORITHMS``, minus
    :data:`FORBIDDEN_ALGORITHMS` and anything this module cannot verify."""
    configured = set(mcp_oauth_settings.ASSERTION_ALGORITHMS)
    chosen = configured if allowed is None else configured & set(allowed)
    return frozenset(alg for alg in chosen if alg in KEY_TYPES and alg not in FORBIDDEN_ALGORITHMS)


def unverified(token: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a compact JWS, NOT verified (to find the signer), read with the
    strict reader (:func:`mcp_oauth.shared.strict_json.jose_object`): no ``NaN``/``Infinity``, no
    duplicate member, no NUL or control character in an identifier claim, numeric dates finite
    and between 1970 and 9999 (RFC 8259 §4, §6; RFC 7515 §5.2; RFC 8725 §3.9). These same objects
    are the ones :func:`verify_assertion` checks once the signature verified: PyJWT's own
    (lenient) parse of the payload is never used.

    :raises AssertionRefused: ``malformed``: not three base64url parts of strict JSON objects;
        or the name of the refused claim (``exp``, ``sub``, ...).
    """
    if not isinstance(token, str) or len(token) > 16384 or token.count(".") != 2:
        raise AssertionRefused("The assertion is not a compact JWT.", "malformed")
    raw_header, raw_claims, _signature = token.split(".")
    try:
        header = jose_object(raw_header)
    except StrictJSONError as exc:
        raise AssertionRefused(f"The assertion's header is refused: {exc}.", _reason(exc)) from None
    try:
        claims = jose_object(raw_claims)
    except StrictJSONError as exc:
        raise AssertionRefused(f"The assertion's claims are refused: {exc}.", _reason(exc)) from None
    return header, claims


def _reason(exc: StrictJSONError) -> str:
    return "malformed" if exc.reason in ("json", "base64", "text", "number") else exc.reason


def _typ_matches(value: Any, expected: str) -> bool:
    if not isinstance(value, str):
        return False
    value = value.lower()
    if value.startswith("application/"):
        value = value[len("application/") :]
    return value == expected.lower()


def _number(claims: dict[str, Any], name: str) -> float | None:
    try:
        value = numeric_date(claims, name)
    except StrictJSONError as exc:
        raise AssertionRefused(f"The assertion's {name} claim is refused: {exc}.", name) from None
    return None if value is None else float(value)


def _verify_signature(token: str, header: dict[str, Any], keys: list[dict[str, Any]], alg: str) -> None:
    """Verify the JWS signature of ``token`` with PyJWT's JWS layer (the payload is not parsed
    there: the claims are the strictly read ones of :func:`unverified`)."""
    kid = header.get("kid")
    candidates = [
        key
        for key in keys
        if key.get("kty") == KEY_TYPES[alg]
        and (kid is None or key.get("kid") == kid)
        and key.get("use", "sig") == "sig"
        and key.get("alg", alg) == alg
    ]
    if not candidates:
        raise AssertionRefused("No registered key of the signer matches the assertion (kid / alg).", "key")
    for candidate in candidates:
        try:
            key = jwt.PyJWK(candidate, algorithm=alg)
            jwt.api_jws.PyJWS().decode_complete(token, key=key, algorithms=[alg])
        except (jwt.PyJWTError, ValueError, TypeError):
            continue
        return
    raise AssertionRefused("The assertion's signature does not verify.", "signature")


def verify_assertion(
    token: Any,
    keys: list[dict[str, Any]],
    *,
    audiences: Iterable[str],
    algorithms: Iterable[str] | None = None,
    typ: str | None = None,
    issuer: str | None = None,
    subject: str | None = None,
    require_iat: bool = False,
    forbidden_typ: str | None = None,
) -> Verified:
    """Verify ``token`` against the signer's ``keys`` (see the module docstring for the checks).

    :param audiences: the accepted ``aud`` values (our issuer; the token endpoint URL when allowed).
    :param algorithms: the signer's own allowed algorithms (None: all configured ones).
    :param typ: the required ``typ`` header (``oauth-id-jag+jwt`` for an ID-JAG).
    :param forbidden_typ: a ``typ`` this kind of assertion must not carry (an ID-JAG is never a client assertion).
    :param issuer: / :param subject: required ``iss`` / ``sub`` values.
    :raises AssertionRefused: the first failed check.
    """
    header, claims = unverified(token)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in accepted_algorithms(algorithms):
        raise AssertionRefused(f"The assertion's signing algorithm {str(alg)[:20]!r} is not accepted.", "alg")
    if typ is not None and not _typ_matches(header.get("typ"), typ):
        raise AssertionRefused(f'The assertion\'s typ header must be "{typ}".', "typ")
    if forbidden_typ is not None and _typ_matches(header.get("typ"), forbidden_typ):
        raise AssertionRefused(f'An assertion of typ "{forbidden_typ}" is not accepted here.', "typ")
    if "crit" in header or "b64" in header:  # RFC 7515 §4.1.11; RFC 7797 §3 (unencoded payloads)
        raise AssertionRefused("The assertion's header has critical extensions this server does not know.", "crit")
    _verify_signature(token, header, keys, alg)

    if issuer is not None and claims.get("iss") != issuer:
        raise AssertionRefused("The assertion's iss claim is not the expected issuer.", "iss")
    if subject is not None and claims.get("sub") != subject:
        raise AssertionRefused("The assertion's sub claim is not the expected subject.", "sub")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise AssertionRefused("The assertion has no sub claim.", "sub")
    accepted = set(audiences)
    aud = claims.get("aud")
    values = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not values or not all(isinstance(value, str) and value in accepted for value in values):
        raise AssertionRefused("The assertion's aud claim does not identify this authorization server.", "aud")

    now = time.time()
    skew = float(mcp_oauth_settings.ASSERTION_CLOCK_SKEW_SECONDS)
    max_lifetime = float(mcp_oauth_settings.ASSERTION_MAX_LIFETIME_SECONDS)
    exp = _number(claims, "exp")
    if exp is None:
        raise AssertionRefused("The assertion has no exp claim.", "exp")
    if exp <= now - skew:
        raise AssertionRefused("The assertion has expired.", "exp")
    if exp > now + max_lifetime + skew:
        raise AssertionRefused("The assertion's exp is further away than this server accepts.", "exp")
    nbf = _number(claims, "nbf")
    if nbf is not None and nbf > now + skew:
        raise AssertionRefused("The assertion is not valid yet (nbf).", "nbf")
    iat = _number(claims, "iat")
    if iat is None and require_iat:
        raise AssertionRefused("The assertion has no iat claim.", "iat")
    if iat is not None and (iat > now + skew or iat < now - max_lifetime - skew):
        raise AssertionRefused("The assertion's iat is in the future or too far in the past.", "iat")
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti or len(jti) > MAX_JTI_LENGTH:
        raise AssertionRefused("The assertion has no usable jti claim.", "jti")
    return Verified(header=header, claims=claims, expires_at=datetime.fromtimestamp(exp, tz=UTC))


def remember_jti(verified: Verified, kind: str) -> None:
    """Record the assertion's ``iss`` + ``jti`` until it expires; refuse one seen before.

    The unique key of :class:`~mcp_oauth.models.UsedAssertion` decides between concurrent uses, in
    any worker or process: exactly one insert succeeds.

    :raises AssertionRefused: ``replay``: this ``iss`` + ``jti`` was used already.
    """
    issuer = str(verified.claims.get("iss", ""))
    key = hashlib.sha256(f"{issuer}\n{verified.claims['jti']}".encode()).hexdigest()
    using = router.db_for_write(UsedAssertion)
    skew = timedelta(seconds=float(mcp_oauth_settings.ASSERTION_CLOCK_SKEW_SECONDS))
    UsedAssertion.objects.using(using).filter(key=key, expires_at__lt=timezone.now()).delete()
    try:
        with transaction.atomic(using=using):
            UsedAssertion.objects.using(using).create(
                key=key, kind=kind, issuer=issuer[:255], expires_at=verified.expires_at + skew
            )
    except IntegrityError:
        raise AssertionRefused("The assertion was used already (jti replay).", "replay") from None


def prune_used_assertions() -> int:
    """Delete the records of assertions that can no longer be presented (expired, clock skew
    included); returns how many."""
    deleted, _ = UsedAssertion.objects.filter(expires_at__lt=timezone.now()).delete()
    return deleted
