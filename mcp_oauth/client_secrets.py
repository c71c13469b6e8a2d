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
* :func:`check_client_secret` is what the validator calls: constant-time comparison; a secret
  stored with any other Django hasher (e.g. PBKDF2 from before) is verified once with it and,
  when right, re-hashed with :class:`ClientSecretHasher` in place (upgrade on successful use);
  a secret stored in plain text (``hash_client_secret=False``) is compared in constant time.
* Failed client authentication is throttled per caller *and* client: past
  ``MCP_OAUTH["THROTTLE_RATES"]["client_auth_failure"]`` (default ``"30/minute"``) failures,
  further attempts by that caller (:func:`mcp_oauth.throttling.caller_key`, i.e.
  ``THROTTLE_KEY_FUNCTION`` or the remote address) for that client are refused without computing
  any hash until the window ends, with HTTP 429 ``slow_down`` and ``Retry-After`` (an
  :class:`~mcp_oauth.errors.OAuthError`). Counting per client alone would let anyone who knows
  a ``client_id`` lock the real client out; another caller presenting the right secret is
  never refused. The caller is the HTTP request bound by :func:`authenticating_caller` (the
  token, revocation and introspection endpoints bind it, :mod:`.authorization_server.guards`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets as _secrets
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from django.contrib.auth.hashers import BasePasswordHasher, check_password, identify_hasher, mask_hash
from django.utils.crypto import constant_time_compare

from . import throttling
from .settings import CLIENT_SECRET_HASHER_PATH

if TYPE_CHECKING:
    from django.http import HttpRequest
    from django_stubs_ext import StrOrPromise

__all__ = ["ALGORITHM", "ClientSecretHasher", "authenticating_caller", "check_client_secret", "hash_client_secret"]

#: The HTTP request whose client authentication is being checked (who is calling).
_caller: ContextVar[HttpRequest | None] = ContextVar("mcp_oauth_client_auth_caller", default=None)

logger = logging.getLogger("mcp_oauth.client_secrets")

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


@contextmanager
def authenticating_caller(request: HttpRequest) -> Iterator[None]:
    """Bind ``request`` as the caller whose client authentications :func:`check_client_secret` counts."""
    token = _caller.set(request)
    try:
        yield
    finally:
        _caller.reset(token)


def _throttle_key(stored: str) -> str:
    request = _caller.get()
    caller = throttling.caller_key(request, "client_auth_failure") if request is not None else "unknown"
    client = hashlib.sha256(stored.encode()).hexdigest()[:32]
    return f"client_auth_failure:{client}:{caller}"


def _upgrade(stored: str, provided: str) -> None:
    from oauth2_provider.models import get_application_model

    application_model = get_application_model()
    new = hash_client_secret(provided)
    # Keyed by the old hash: the row whose secret was just verified (and not changed since).
    updated = application_model.objects.filter(client_secret=stored).update(client_secret=new)
    if updated:
        from .authorization_server.clients import bump_clients_generation

        bump_clients_generation()  # no signal for a bulk update
        logger.info("upgraded the client secret hash of %d client(s) to %s", updated, ALGORITHM)


def check_client_secret(provided: str, stored: str) -> bool:
    """Whether ``provided`` is the secret stored as ``stored``.

    Constant-time for every storage format; upgrades a legacy hash on success; counts failures
    per caller and client, and refuses without hashing once ``client_auth_failure`` is exceeded.

    :raises OAuthError: 429 ``slow_down`` with ``Retry-After`` when this caller is over its
        ``client_auth_failure`` allowance for this client.
    """
    if not isinstance(provided, str) or not isinstance(stored, str) or not stored:
        return False
    key = _throttle_key(stored)
    retry_after = throttling.exhausted_for("client_auth_failure", key)
    if retry_after is not None:
        logger.warning("client authentication refused: too many failures from this caller for this client")
        raise throttling.throttle_error(retry_after)
    if stored.startswith(ALGORITHM + "$"):
        ok = _hasher.verify(provided, stored)
    else:
        try:
            identify_hasher(stored)
        except ValueError:  # stored in plain text (hash_client_secret=False)
            ok = constant_time_compare(provided, stored)
        else:
            ok = check_password(provided, stored)
            if ok:
                _upgrade(stored, provided)
    if not ok:
        throttling.count_failure("client_auth_failure", key)
    return ok
