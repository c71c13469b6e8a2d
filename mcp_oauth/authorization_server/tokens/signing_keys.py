"""The access-token signing keys: creation, encryption at rest, rotation with overlap (RFC 9068).

**Encryption.** A key's private half is stored as its PKCS#8 PEM encrypted with Fernet
(``cryptography``) under keys derived (HKDF-SHA256) from ``MCP_OAUTH["JWT_ACCESS_TOKEN_ENCRYPTION_KEYS"]``
(a list of secrets: the first encrypts, all decrypt), else from ``SECRET_KEY`` and
``SECRET_KEY_FALLBACKS``: a copy of the database alone cannot sign tokens, and a ``SECRET_KEY``
rotation through ``SECRET_KEY_FALLBACKS`` keeps the keys readable (re-encrypt them with
``rotate_access_token_keys --reencrypt`` before dropping the fallback).

**Rotation** (:func:`rotate`; ``manage.py rotate_access_token_keys``): the next key is published
at once and signs only ``publish_seconds`` later (``JWT_ACCESS_TOKEN_PUBLISH_SECONDS``): every
resource server that refreshes the JWK Set at least that often knows it before the first token
signed with it. The key it replaces keeps verifying until its last token expired: it is retired
``publish_seconds`` + the longest access-token lifetime (:func:`longest_lifetime`) after the
rotation. Retired keys leave the JWK Set; :func:`prune` deletes their rows.
"""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, MultiFernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models import AccessTokenSigningKey, Organization
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "create_key",
    "decrypt_private_key",
    "encrypt_private_key",
    "longest_lifetime",
    "private_key",
    "prune",
    "reencrypt",
    "rotate",
]

_HKDF_INFO = b"mcp_oauth access-token signing keys"


def _secrets() -> list[str | bytes]:
    configured = mcp_oauth_settings.JWT_ACCESS_TOKEN_ENCRYPTION_KEYS
    if configured:
        return list(configured)
    return [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]


def _derive(secret: str | bytes) -> Fernet:
    material = secret.encode("utf-8") if isinstance(secret, str) else secret
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(material)
    return Fernet(base64.urlsafe_b64encode(derived))


def _fernet() -> MultiFernet:
    return MultiFernet([_derive(secret) for secret in _secrets()])


def encrypt_private_key(pem: bytes) -> str:
    """The Fernet token (text) of a PEM private key under the current first secret."""
    return _fernet().encrypt(pem).decode("ascii")


def decrypt_private_key(encrypted: str) -> bytes:
    """The PEM of an encrypted private key.

    :raises cryptography.fernet.InvalidToken: none of the configured secrets opens it."""
    return _fernet().decrypt(encrypted.encode("ascii"))


@lru_cache(maxsize=16)
def _loaded(encrypted: str, secrets_digest: str) -> Any:
    return serialization.load_pem_private_key(decrypt_private_key(encrypted), password=None)


def private_key(encrypted: str) -> Any:
    """The private key object of an encrypted PEM (decrypted once per process and secrets)."""
    digest = hashlib.sha256(repr(_secrets()).encode("utf-8")).hexdigest()
    return _loaded(encrypted, digest)


def _public_jwk(key: Any, alg: str) -> dict[str, Any]:
    if alg == "ES256":
        jwk = json.loads(ECAlgorithm.to_jwk(key.public_key()))
        members = {"crv": jwk["crv"], "kty": "EC", "x": jwk["x"], "y": jwk["y"]}
    else:
        jwk = json.loads(RSAAlgorithm.to_jwk(key.public_key()))
        members = {"e": jwk["e"], "kty": "RSA", "n": jwk["n"]}
    # RFC 7638 thumbprint: the required members in lexicographic order, no whitespace.
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode("utf-8")
    kid = base64.urlsafe_b64encode(hashlib.sha256(canonical).digest()).rstrip(b"=").decode("ascii")
    return {**members, "kid": kid, "alg": alg, "use": "sig"}


def create_key(alg: str | None = None, signs_from: datetime | None = None) -> AccessTokenSigningKey:
    """A new signing key (ES256: P-256; RS256: 3072-bit RSA), saved.

    :param alg: ``ES256`` or ``RS256``; None: ``JWT_ACCESS_TOKEN_ALGORITHM``.
    :param signs_from: when it starts signing (None: now).
    :raises ValueError: another algorithm."""
    alg = alg or mcp_oauth_settings.JWT_ACCESS_TOKEN_ALGORITHM
    if alg == "ES256":
        key: Any = ec.generate_private_key(ec.SECP256R1())
    elif alg == "RS256":
        key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    else:
        raise ValueError(f"unsupported access-token algorithm {alg!r} (ES256 or RS256)")
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    jwk = _public_jwk(key, alg)
    return AccessTokenSigningKey.objects.create(
        kid=jwk["kid"],
        alg=alg,
        public_jwk=jwk,
        private_key=encrypt_private_key(pem),
        signs_from=signs_from or timezone.now(),
    )


def longest_lifetime() -> int:
    """The longest access-token lifetime the site may issue, in seconds: DOT's
    ``ACCESS_TOKEN_EXPIRE_SECONDS``, an organization's own lifetime, ``JWT_ACCESS_TOKEN_MAX_LIFETIME_SECONDS``
    when set (a site whose lifetimes come from elsewhere names their bound there)."""
    candidates = [int(oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS)]
    configured = mcp_oauth_settings.JWT_ACCESS_TOKEN_MAX_LIFETIME_SECONDS
    if configured:
        candidates.append(int(configured))
    longest_organization = (
        Organization.objects.exclude(access_token_lifetime__isnull=True)
        .order_by("-access_token_lifetime")
        .values_list("access_token_lifetime", flat=True)
        .first()
    )
    if longest_organization:
        candidates.append(int(longest_organization))
    return max(candidates)


def rotate(
    alg: str | None = None, publish_seconds: int | None = None, now: datetime | None = None
) -> tuple[AccessTokenSigningKey, list[AccessTokenSigningKey]]:
    """Create the next key, signing ``publish_seconds`` from ``now``; schedule the retirement of
    the keys it replaces (every published key with no retirement yet).

    With no key yet, the first one signs at once.

    :returns: ``(new key, keys scheduled for retirement)``."""
    now = now or timezone.now()
    if publish_seconds is None:
        publish_seconds = int(mcp_oauth_settings.JWT_ACCESS_TOKEN_PUBLISH_SECONDS)
    with transaction.atomic(using=AccessTokenSigningKey.objects.db):
        previous = list(AccessTokenSigningKey.objects.select_for_update().published(now).filter(retire_at__isnull=True))
        signs_from = now + timedelta(seconds=publish_seconds) if previous else now
        created = create_key(alg, signs_from=signs_from)
        retire_at = signs_from + timedelta(seconds=longest_lifetime())
        for key in previous:
            key.retire_at = retire_at
            key.save(update_fields=["retire_at"])
    return created, previous


def prune(now: datetime | None = None) -> int:
    """Delete the rows of retired keys; returns how many."""
    deleted, _ = AccessTokenSigningKey.objects.filter(retire_at__lte=now or timezone.now()).delete()
    return deleted


def reencrypt() -> int:
    """Encrypt every private key again under the first configured secret (after adding a secret
    in front of the list, before dropping an old one); returns how many.

    :raises cryptography.fernet.InvalidToken: a key none of the secrets opens."""
    fernet = _fernet()
    count = 0
    for key in AccessTokenSigningKey.objects.all():
        key.private_key = fernet.rotate(key.private_key.encode("ascii")).decode("ascii")
        key.save(update_fields=["private_key"])
        count += 1
    return count
