"""A small client-side DPoP implementation for the tests (RFC 9449 §4): keys made in the test,
proofs signed with PyJWT, and an ``httpx`` auth flow that sends ``Authorization: DPoP`` with a
fresh proof on every request and retries once with the server's ``DPoP-Nonce`` (§8, §9).

Neither official MCP SDK (Python 2.3.0, TypeScript 2.4.0) has a DPoP client: the Python SDK only
knows the metadata fields, the TypeScript one the error codes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Generator
from typing import Any

import httpx2 as httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class DPoPKey:
    """A DPoP key pair: ``alg`` is ES256 (default), ES384, RS256, PS256 or EdDSA."""

    def __init__(self, alg: str = "ES256") -> None:
        self.alg = alg
        if alg == "ES256":
            self.private = ec.generate_private_key(ec.SECP256R1())
            self.jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif alg == "ES384":
            self.private = ec.generate_private_key(ec.SECP384R1())
            self.jwk = ECAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif alg in ("RS256", "PS256"):
            self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        elif alg == "EdDSA":
            self.private = ed25519.Ed25519PrivateKey.generate()
            self.jwk = OKPAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        else:
            raise ValueError(alg)

    @property
    def thumbprint(self) -> str:
        """RFC 7638 thumbprint, computed independently with jwcrypto."""
        from jwcrypto import jwk as jwcrypto_jwk

        return jwcrypto_jwk.JWK(**self.jwk).thumbprint()

    def proof(
        self,
        method: str,
        url: str,
        access_token: str | None = None,
        *,
        nonce: str | None = None,
        iat: float | None = None,
        jti: str | None = None,
        headers: dict[str, Any] | None = None,
        claims: dict[str, Any] | None = None,
    ) -> str:
        """A DPoP proof for ``method`` ``url`` (``ath`` of ``access_token`` when given)."""
        payload: dict[str, Any] = {
            "jti": jti or secrets.token_urlsafe(16),
            "htm": method,
            "htu": url,
            "iat": int(time.time() if iat is None else iat),
        }
        if access_token is not None:
            payload["ath"] = b64url(hashlib.sha256(access_token.encode()).digest())
        if nonce is not None:
            payload["nonce"] = nonce
        payload.update(claims or {})
        header = {"typ": "dpop+jwt", "jwk": self.jwk, **(headers or {})}
        return jwt.encode(payload, self.private, algorithm=self.alg, headers=header)


def unsigned_proof(header: dict[str, Any], payload: dict[str, Any], signature: bytes = b"") -> str:
    """A proof assembled by hand (``alg: none``, forged headers)."""
    return ".".join([b64url(json.dumps(header).encode()), b64url(json.dumps(payload).encode()), b64url(signature)])


class DPoPAuth(httpx.Auth):
    """``httpx`` auth flow: ``Authorization: DPoP <token>`` plus a proof for each request; a 401
    ``use_dpop_nonce`` is retried once with the ``DPoP-Nonce`` it carried."""

    def __init__(self, key: DPoPKey, access_token: str) -> None:
        self.key = key
        self.access_token = access_token
        self.nonce: str | None = None

    def _sign(self, request: httpx.Request) -> None:
        url = str(request.url.copy_with(query=None, fragment=None))
        request.headers["Authorization"] = f"DPoP {self.access_token}"
        request.headers["DPoP"] = self.key.proof(request.method, url, self.access_token, nonce=self.nonce)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        self._sign(request)
        response = yield request
        if response.headers.get("DPoP-Nonce"):
            self.nonce = response.headers["DPoP-Nonce"]
            if response.status_code == 401 and "use_dpop_nonce" in response.headers.get("WWW-Authenticate", ""):
                self._sign(request)
                yield request
