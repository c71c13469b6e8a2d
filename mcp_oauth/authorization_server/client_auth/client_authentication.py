"""Client authentication with a secret at the token, revocation and introspection endpoints.

Confidential clients authenticate with a secret (``client_secret_basic`` / ``client_secret_post``,
RFC 6749 §2.3.1), stored hashed (:mod:`mcp_oauth.authorization_server.client_auth.client_secrets`).

* :func:`check_client_secret` is what the validator calls: constant-time comparison; a secret
  stored with any other Django hasher (e.g. PBKDF2 from before) is verified once with it and,
  when right, re-hashed with :class:`~mcp_oauth.authorization_server.client_auth.client_secrets.ClientSecretHasher` in place
  (upgrade on successful use); a secret stored in plain text (``hash_client_secret=False``) is
  compared in constant time.
* Failed client authentication is throttled per caller *and* client: past
  ``MCP_OAUTH["THROTTLE_RATES"]["client_auth_failure"]`` (default ``"30/minute"``) failures,
  further attempts by that caller (:func:`mcp_oauth.shared.throttling.caller_key`, i.e.
  ``THROTTLE_KEY_FUNCTION`` or the remote address) for that client are refused without computing
  any hash until the window ends, with HTTP 429 ``slow_down`` and ``Retry-After`` (an
  :class:`~mcp_oauth.errors.OAuthError`). Counting per client alone would let anyone who knows
  a ``client_id`` lock the real client out; another caller presenting the right secret is
  never refused. The caller is the HTTP request bound by :func:`authenticating_caller` (the
  token, revocation and introspection endpoints bind it, :mod:`.guards`).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.contrib.auth.hashers import check_password, identify_hasher
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare
from oauth2_provider.models import get_application_model

from mcp_oauth.authorization_server.client_auth.client_secrets import ALGORITHM, ClientSecretHasher, hash_client_secret
from mcp_oauth.authorization_server.client_registry.clients import bump_clients_generation
from mcp_oauth.shared import throttling

__all__ = ["authenticating_caller", "check_client_secret"]

#: The HTTP request whose client authentication is being checked (who is calling).
_caller: ContextVar[HttpRequest | None] = ContextVar("mcp_oauth_client_auth_caller", default=None)

# The logger's name predates this module (sites may configure it).
logger = logging.getLogger("mcp_oauth.client_secrets")

_hasher = ClientSecretHasher()


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
    application_model = get_application_model()
    new = hash_client_secret(provided)
    # Keyed by the old hash: the row whose secret was just verified (and not changed since).
    updated = application_model.objects.filter(client_secret=stored).update(client_secret=new)
    if updated:
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
