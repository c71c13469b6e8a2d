"""Signing keys made at test time and JWTs signed with them (RFC 7523 client assertions, ID-JAGs).

Keys come from ``cryptography``; JWTs are signed by PyJWT. Nothing is ever written to the repository.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm


@dataclass
class SigningKey:
    """A private key, its algorithm and ``kid``; :attr:`public_jwk` is what the signer registers."""

    __test__ = False

    private: Any
    alg: str
    kid: str

    @property
    def public_jwk(self) -> dict[str, Any]:
        public = self.private.public_key()
        if self.alg.startswith(("RS", "PS")):
            jwk = RSAAlgorithm.to_jwk(public, as_dict=True)
        elif self.alg.startswith("ES"):
            jwk = ECAlgorithm.to_jwk(public, as_dict=True)
        else:
            jwk = OKPAlgorithm.to_jwk(public, as_dict=True)
        return {**jwk, "kid": self.kid, "use": "sig"}

    @property
    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.public_jwk]}

    @property
    def private_pem(self) -> str:
        return self.private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()

    @property
    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, claims: dict[str, Any], **header: Any) -> str:
        headers = {"kid": self.kid, **header}
        return jwt.encode(claims, self.private, algorithm=self.alg, headers=headers)


def make_key(alg: str = "RS256", kid: str | None = None) -> SigningKey:
    if alg.startswith(("RS", "PS")):
        private: Any = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    elif alg == "ES256":
        private = ec.generate_private_key(ec.SECP256R1())
    elif alg == "ES384":
        private = ec.generate_private_key(ec.SECP384R1())
    else:
        private = ed25519.Ed25519PrivateKey.generate()
    return SigningKey(private, alg, kid or uuid.uuid4().hex[:8])


def claims(**values: Any) -> dict[str, Any]:
    """Standard claims (``iat`` now, ``exp`` in 5 minutes, a fresh ``jti``) plus ``values`` (None removes)."""
    now = int(time.time())
    base: dict[str, Any] = {"iat": now, "exp": now + 300, "jti": uuid.uuid4().hex}
    base.update(values)
    return {k: v for k, v in base.items() if v is not None}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsigned(payload: dict[str, Any], **header: Any) -> str:
    """An ``alg: none`` JWT (RFC 7519 §6)."""
    head = {"alg": "none", "typ": "JWT", **header}
    return f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(payload).encode())}."


def hs256_with_public_key(key: SigningKey, payload: dict[str, Any], **header: Any) -> str:
    """An HS256 JWT whose HMAC secret is the signer's public key PEM (the RS/HS confusion attack)."""
    head = {"alg": "HS256", "typ": "JWT", "kid": key.kid, **header}
    signing_input = f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(payload).encode())}"
    mac = hmac.new(key.public_pem, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64(mac)}"
