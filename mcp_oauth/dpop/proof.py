"""DPoP proof JWTs (RFC 9449 §4): parse, check, verify; the key's JWK thumbprint (RFC 7638).

:func:`verify_proof` makes every check of §4.3 that needs no shared state; the caller adds the
``jti`` replay check (:mod:`.replay`) and the key binding (``cnf.jkt``). Signatures are verified
with PyJWT's algorithm objects (``cryptography`` underneath); the public keys are parsed once and
kept by thumbprint, so a client that sends the same key again costs one signature check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from jwt.algorithms import get_default_algorithms
from jwt.exceptions import InvalidKeyError

from mcp_oauth.dpop.nonce import nonce_valid
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.strict_json import StrictJSONError, jose_object, numeric_date

__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "DPoPProof",
    "InvalidDPoPProof",
    "UseDPoPNonce",
    "access_token_hash",
    "jwk_thumbprint",
    "normalize_htu",
    "supported_algorithms",
    "verify_proof",
]

#: Largest proof accepted (bytes): an RSA-4096 proof is about 1.5 KB.
MAX_PROOF_BYTES = 8192
#: Longest ``jti`` accepted (characters).
MAX_JTI_LENGTH = 256
#: Smallest RSA modulus accepted (bits).
MIN_RSA_BITS = 2048

#: The asymmetric JWS algorithms a proof may use (RFC 9449 §4.2: no ``none``, no MAC), with the
#: key type and curves each needs.
ASYMMETRIC_ALGORITHMS: dict[str, tuple[str, frozenset[str]]] = {
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "RS256": ("RSA", frozenset()),
    "RS384": ("RSA", frozenset()),
    "RS512": ("RSA", frozenset()),
    "PS256": ("RSA", frozenset()),
    "PS384": ("RSA", frozenset()),
    "PS512": ("RSA", frozenset()),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
}
#: RFC 7638 §3.2: the required members of each key type, the only ones the thumbprint hashes.
_THUMBPRINT_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}
#: Members that only a private (or symmetric) key has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037).
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})

_ALGORITHMS = get_default_algorithms()


class InvalidDPoPProof(Exception):
    """The proof fails a check of RFC 9449 §4.3 (``invalid_dpop_proof``); the message says which."""


class UseDPoPNonce(Exception):
    """The server requires a nonce and the proof has none or a stale one (``use_dpop_nonce``, §8)."""


@dataclass(frozen=True)
class DPoPProof:
    """A proof that passed :func:`verify_proof`.

    ``jkt``: the base64url SHA-256 thumbprint of its ``jwk`` (RFC 7638); ``jti``: its identifier;
    ``iat``: when it was made (seconds since the epoch); ``htm`` / ``htu``: method and URL it is for.
    """

    jkt: str
    jti: str
    iat: float
    htm: str
    htu: str


def supported_algorithms() -> list[str]:
    """``DPOP_SIGNING_ALG_VALUES_SUPPORTED`` restricted to :data:`ASYMMETRIC_ALGORITHMS`, in the
    configured order (the ``dpop_signing_alg_values_supported`` of both metadata documents)."""
    return [alg for alg in mcp_oauth_settings.DPOP_SIGNING_ALG_VALUES_SUPPORTED if alg in ASYMMETRIC_ALGORITHMS]


def _b64decode(part: str) -> bytes:
    if not part or "=" in part:
        raise InvalidDPoPProof("The DPoP proof is not a compact JWS.")
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise InvalidDPoPProof("The DPoP proof is not valid base64url.") from None


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json_object(segment: str, what: str) -> dict[str, Any]:
    """The strictly read JSON object of a proof segment (:func:`mcp_oauth.shared.strict_json.jose_object`:
    no ``NaN``/``Infinity``, no duplicate member, no control character in ``jti``/``htm``/``htu``,
    a finite ``iat`` between 1970 and 9999; RFC 8259 §4, §6, RFC 7515 §5.2, RFC 9449 §4.3 step 2)."""
    if not segment or "=" in segment:
        raise InvalidDPoPProof("The DPoP proof is not a compact JWS.")
    try:
        return jose_object(segment)
    except StrictJSONError as exc:
        raise InvalidDPoPProof(f"The DPoP proof's {what} is refused: {exc}.") from None


def jwk_thumbprint(jwk: dict[str, Any]) -> str:
    """The RFC 7638 JWK SHA-256 thumbprint of a public ``jwk``, base64url without padding.

    :raises InvalidDPoPProof: unknown ``kty``, or a required member missing or not a string.
    """
    members = _THUMBPRINT_MEMBERS.get(jwk.get("kty"))  # type: ignore[arg-type]
    if members is None:
        raise InvalidDPoPProof("The DPoP proof's jwk has an unsupported kty.")
    required = {}
    for name in members:
        value = jwk.get(name)
        if not isinstance(value, str) or not value:
            raise InvalidDPoPProof(f"The DPoP proof's jwk lacks {name}.")
        required[name] = value
    canonical = json.dumps(required, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return _b64encode(hashlib.sha256(canonical.encode("utf-8")).digest())


def access_token_hash(access_token: str) -> str:
    """``ath``: base64url of the SHA-256 of the access token's ASCII value (RFC 9449 §4.2)."""
    return _b64encode(hashlib.sha256(access_token.encode("ascii")).digest())


@lru_cache(maxsize=512)
def normalize_htu(url: str) -> str | None:
    """``url`` without query and fragment, scheme and host lowercased, the default port dropped
    and an empty path written ``/`` (RFC 9449 §4.3 step 9, RFC 3986 §6.2.2-§6.2.3); None when it
    is not an absolute http(s) URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        return None
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != (443 if scheme == "https" else 80):
        host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path or '/'}"


class _KeyCache:
    """Parsed public keys by thumbprint (at most ``size``; the oldest goes first)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._keys: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, jkt: str, jwk: dict[str, Any], alg: str) -> Any:
        key = self._keys.get(jkt)
        if key is not None:
            return key
        try:
            key = _ALGORITHMS[alg].from_jwk(jwk)
        except (InvalidKeyError, ValueError, TypeError, KeyError):
            raise InvalidDPoPProof("The DPoP proof's jwk is not a valid public key.") from None
        if jwk["kty"] == "RSA" and key.key_size < MIN_RSA_BITS:
            raise InvalidDPoPProof(f"The DPoP proof's RSA key is shorter than {MIN_RSA_BITS} bits.")
        with self._lock:
            while len(self._keys) >= self.size:
                del self._keys[next(iter(self._keys))]
            self._keys[jkt] = key
        return key

    def clear(self) -> None:
        with self._lock:
            self._keys.clear()


keys = _KeyCache()


def _header(raw_header: str, allowed: Iterable[str]) -> tuple[str, dict[str, Any], str]:
    """``(alg, jwk, jkt)`` of a proof header that passes §4.3 steps 4-7."""
    header = _json_object(raw_header, "header")
    if header.get("typ") != "dpop+jwt":
        raise InvalidDPoPProof('The DPoP proof\'s typ must be "dpop+jwt".')
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ASYMMETRIC_ALGORITHMS or alg not in allowed:
        raise InvalidDPoPProof(f"The DPoP proof's alg must be one of: {' '.join(allowed)}.")
    jwk = header.get("jwk")
    if not isinstance(jwk, dict):
        raise InvalidDPoPProof("The DPoP proof's header has no jwk.")
    if _PRIVATE_MEMBERS.intersection(jwk):
        raise InvalidDPoPProof("The DPoP proof's jwk must be a public key.")
    kty, curves = ASYMMETRIC_ALGORITHMS[alg]
    if jwk.get("kty") != kty or (curves and jwk.get("crv") not in curves):
        raise InvalidDPoPProof(f"The DPoP proof's jwk does not fit alg {alg}.")
    return alg, jwk, jwk_thumbprint(jwk)


def verify_proof(
    proof: str | None,
    *,
    method: str,
    urls: Iterable[str],
    access_token: str | None = None,
    now: float | None = None,
    more_urls: Callable[[], Iterable[str]] | None = None,
) -> DPoPProof:
    """Check the DPoP proof ``proof`` (the ``DPoP`` header's value) of a request (RFC 9449 §4.3).

    :param method: the request's HTTP method (``htm`` must equal it).
    :param urls: the request's URL in each spelling the server answers to (``htu``, compared
        after :func:`normalize_htu`, must equal one).
    :param more_urls: further spellings of the URL, asked for only when ``htu`` matches none of
        ``urls`` (they may cost more to work out).
    :param access_token: the access token sent with the proof (resource server): ``ath`` must
        be its hash. None at the token endpoint (``ath`` is then not looked at).
    :param now: the current time (seconds since the epoch; None: the clock).
    :returns: the :class:`DPoPProof`. The ``jti`` is not checked for replay here (:mod:`.replay`).
    :raises InvalidDPoPProof: any check failed (``invalid_dpop_proof``).
    :raises UseDPoPNonce: ``DPOP_NONCE_REQUIRED`` and the proof has no current nonce.
    """
    allowed = supported_algorithms()
    if not proof or len(proof) > MAX_PROOF_BYTES:
        raise InvalidDPoPProof(
            "A DPoP proof is required in the DPoP header." if not proof else "The proof is too long."
        )
    if "," in proof or proof.count(".") != 2:  # a second DPoP header field is joined with a comma
        raise InvalidDPoPProof("Exactly one DPoP proof, a compact JWS, is required.")
    raw_header, raw_payload, raw_signature = proof.strip().split(".")
    alg, jwk, jkt = _header(raw_header, allowed)
    key = keys.get(jkt, jwk, alg)
    try:
        valid = _ALGORITHMS[alg].verify(f"{raw_header}.{raw_payload}".encode("ascii"), key, _b64decode(raw_signature))
    except (ValueError, TypeError, UnicodeEncodeError):
        valid = False
    if not valid:
        raise InvalidDPoPProof("The DPoP proof's signature is invalid.")
    claims = _json_object(raw_payload, "payload")
    jti, htm, htu = claims.get("jti"), claims.get("htm"), claims.get("htu")
    if not isinstance(jti, str) or not jti or len(jti) > MAX_JTI_LENGTH:
        raise InvalidDPoPProof("The DPoP proof's jti is missing or too long.")
    if htm != method:
        raise InvalidDPoPProof(f"The DPoP proof's htm must be {method}.")
    given = normalize_htu(htu) if isinstance(htu, str) else None
    if given is None or (
        given not in {normalize_htu(url) for url in urls}
        and (more_urls is None or given not in {normalize_htu(url) for url in more_urls()})
    ):
        raise InvalidDPoPProof("The DPoP proof's htu is not this request's URL.")
    iat = numeric_date(claims, "iat")  # a present iat was checked by _json_object: finite, 1970-9999
    if iat is None:
        raise InvalidDPoPProof("The DPoP proof's iat is missing or not a number of seconds.")
    current = time.time() if now is None else now
    if iat < current - int(mcp_oauth_settings.DPOP_PROOF_MAX_AGE_SECONDS):
        raise InvalidDPoPProof("The DPoP proof is too old (iat).")
    if iat > current + int(mcp_oauth_settings.DPOP_PROOF_LEEWAY_SECONDS):
        raise InvalidDPoPProof("The DPoP proof's iat is in the future.")
    if access_token is not None and claims.get("ath") != access_token_hash(access_token):
        raise InvalidDPoPProof("The DPoP proof's ath does not match the access token.")
    if mcp_oauth_settings.DPOP_NONCE_REQUIRED:
        nonce = claims.get("nonce")
        if not isinstance(nonce, str) or not nonce_valid(nonce, current):
            raise UseDPoPNonce("A current DPoP nonce is required: use the DPoP-Nonce header of this response.")
    return DPoPProof(jkt=jkt, jti=jti, iat=float(iat), htm=method, htu=str(htu))
