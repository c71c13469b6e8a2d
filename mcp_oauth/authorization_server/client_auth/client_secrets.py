"""Client secrets hashed for machines, not for people.

Confidential clients authenticate at the token endpoint with a secret (``client_secret_basic``
/ ``client_secret_post``, RFC 6749 §2.3.1). DOT stores it hashed with a Django password hasher;
its default, PBKDF2 with a million iterations, costs ~180 ms of CPU per grant: a cap of a few
grants per core per second and a CPU-exhaustion lever for anyone who knows a ``client_id``.
Password stretching protects *low-entropy* secrets; the secrets this server issues are 128+ bit
random strings, for which one keyed hash is as strong as any number of iterations.

* :class:`ClientSecretHasher` (algorithm ``"mcp_oauth_sha256"``): ``HMAC-SHA256(key=salt,
  msg=secret)``, 128-bit random salt, stored as ``mcp_oauth_sha256$<salt>$<hex digest>``
  (~ 2 µs). The default ``OAUTH2_PROVIDER["CLIENT_SECRET_HASHER"]`` once it is listed in
  ``PASSWORD_HASHERS`` (anywhere after the password hasher: user passwords keep the first
  entry); until then DOT's default applies and ``check --deploy`` warns (``mcp_oauth.W051``).
  Naming it in ``CLIENT_SECRET_HASHER`` without listing it is ``mcp_oauth.E050``.
* Checking a secret a client presents (constant-time, upgrade of a legacy hash on use, failures
  throttled per caller and client) is the token endpoint's:
  :mod:`mcp_oauth.authorization_server.client_auth.client_authentication`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as _secrets
from typing import TYPE_CHECKING, Any

from django.contrib.auth.hashers import BasePasswordHasher, mask_hash
from django.utils.crypto import constant_time_compare

from mcp_oauth.settings import CLIENT_SECRET_HASHER_PATH

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

__all__ = ["ALGORITHM", "HASHER_PATH", "ClientSecretHasher", "hash_client_secret"]

ALGORITHM = "mcp_oauth_sha256"
#: Import path for ``PASSWORD_HASHERS``.
HASHER_PATH = CLIENT_SECRET_HASHER_PATH


class ClientSecretHasher(BasePasswordHasher):
    """HMAC-SHA256 of a high-entropy machine secret (never use it for user passwords)."""

    algorithm = ALGORITHM

    def salt(self) -> str:
        return _secrets.token_hex(16)

    def encode(self, password: str, salt: str) -> str:
        self._check_encode_args(password, salt)  # type: ignore[attr-defined]  # Django's helper, absent from django-stubs
        digest = hmac.new(salt.encode(), password.encode(), hashlib.sha256).hexdigest()
        return f"{self.algorithm}${salt}${digest}"

    def decode(self, encoded: str) -> dict[str, str]:
        algorithm, salt, digest = encoded.split("$", 2)
        assert algorithm == self.algorithm
        return {"algorithm": algorithm, "hash": digest, "salt": salt}

    def verify(self, password: str, encoded: str) -> bool:
        decoded = self.decode(encoded)
        return constant_time_compare(encoded, self.encode(password, decoded["salt"]))

    def safe_summary(self, encoded: str) -> dict[StrOrPromise, Any]:
        decoded = self.decode(encoded)
        return {
            "algorithm": decoded["algorithm"],
            "salt": mask_hash(decoded["salt"]),
            "hash": mask_hash(decoded["hash"]),
        }

    def must_update(self, encoded: str) -> bool:
        return False

    def harden_runtime(self, password: str, encoded: str) -> None:
        return None


_hasher = ClientSecretHasher()


def hash_client_secret(secret: str) -> str:
    """``mcp_oauth_sha256$<salt>$<digest>`` of ``secret``."""
    return _hasher.encode(secret, _hasher.salt())
