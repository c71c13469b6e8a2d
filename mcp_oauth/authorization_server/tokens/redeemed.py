"""Redeemed authorization codes refused from the shared cache, before any database work.

OAuth 2.1 §4.1.3 / RFC 9700 §4.2.4: a code presented a second time is refused with
``invalid_grant``, and when the replay carries the right PKCE verifier the tokens the code
produced are revoked (:class:`~.validator.MCPOAuth2Validator`). That path reads the client,
the grant and the redeemed row and writes the revocation: under a burst of replays of one
code (a leaked code, a client retrying in a loop) every replay queued for a pooled database
connection and for the same row locks, and most ended as 503.

Here a redeemed code leaves a marker in ``MCP_OAUTH["TOKEN_CACHE"]`` (key
``mcp_oauth:redeemed:<sha256 of the code>``, never the code itself), written when the
redemption commits: the client's ``client_id``, the code's PKCE challenge, and whether a
verified replay already revoked what the code issued. :func:`known_replay` answers a token
request that presents a marked code with the same ``client_id`` from the marker alone when
the database path would change nothing:

* the tokens were already revoked by an earlier verified replay, or
* the request's ``code_verifier`` does not match the code's challenge (such a replay revokes
  nothing, so a guessed code cannot log users out).

The first replay with the right verifier still takes the database path (it revokes, records
``code.replay`` and sends :data:`~mcp_oauth.signals.authorization_code_replayed`), then
:func:`mark_revoked` makes the later ones cheap. A cache outage or a missing marker means the
database path, which stays the authority.

A burst that arrives all at once comes before the marker exists. :func:`redemption_slot`
bounds the ``authorization_code`` requests that run the database path at once in a process
(as many as the database pool has connections): the others wait for a slot holding no
connection, and check the marker again when they get one, so once the winner has committed
they are answered from the marker. A request that waits longer than the pool's ``timeout``
gets 503 + ``Retry-After`` (:class:`SlotUnavailable`).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.cache import caches
from django.db import connections, transaction

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.overload import UNAVAILABLE_ERRORS

__all__ = [
    "MARKER_PREFIX",
    "MARKER_SECONDS",
    "SlotUnavailable",
    "known_replay",
    "mark_revoked",
    "redemption_slot",
    "remember_redeemed",
]

logger = logging.getLogger("mcp_oauth.authorization_server")

MARKER_PREFIX = "mcp_oauth:redeemed:"
#: How long a marker is kept (seconds); afterwards a replay takes the database path again.
MARKER_SECONDS = 600

_CACHE_ERRORS = tuple(error for error in UNAVAILABLE_ERRORS if error.__module__.startswith("redis"))


def _key(code: str) -> str:
    return MARKER_PREFIX + hashlib.sha256(code.encode("utf-8")).hexdigest()


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii", "replace")).digest()).rstrip(b"=").decode()


def _write(code: str, marker: dict[str, Any]) -> None:
    def write() -> None:
        try:
            caches[mcp_oauth_settings.TOKEN_CACHE].set(_key(code), marker, timeout=MARKER_SECONDS)
        except _CACHE_ERRORS as exc:
            logger.warning("cache unavailable: redeemed-code marker not written: %s", exc)

    transaction.on_commit(write)


def remember_redeemed(code: str, client_id: str, challenge: str) -> None:
    """Mark ``code`` as redeemed by ``client_id`` (written when the transaction commits)."""
    _write(code, {"client_id": client_id, "challenge": challenge, "revoked": False})


def mark_revoked(code: str, client_id: str, challenge: str) -> None:
    """Record that a verified replay revoked what ``code`` issued (when the transaction commits)."""
    _write(code, {"client_id": client_id, "challenge": challenge, "revoked": True})


def known_replay(form: Any) -> bool:
    """Whether the token request ``form`` (its POST data) replays a marked code and the database
    path would only refuse it: then answer 400 ``invalid_grant`` without touching the database."""
    if form.get("grant_type") != "authorization_code":
        return False
    code, client_id = form.get("code"), form.get("client_id")
    if not code or not client_id or len(code) > 512:
        return False
    try:
        marker = caches[mcp_oauth_settings.TOKEN_CACHE].get(_key(code))
    except _CACHE_ERRORS:
        return False
    if not isinstance(marker, dict) or not secrets.compare_digest(str(marker.get("client_id")), client_id):
        return False
    if marker.get("revoked"):
        return True
    verifier = form.get("code_verifier") or ""
    challenge = marker.get("challenge") or ""
    return not (challenge and verifier and secrets.compare_digest(_s256(verifier), challenge))


class SlotUnavailable(Exception):
    """No redemption slot within the pool's timeout (the caller answers 503 + ``Retry-After``)."""


_slots_lock = threading.Lock()
_slots: tuple[threading.BoundedSemaphore, float] | None = None


def _pool_slots() -> tuple[threading.BoundedSemaphore, float]:
    global _slots
    with _slots_lock:
        if _slots is None:
            pool = (connections["default"].settings_dict.get("OPTIONS") or {}).get("pool")
            size, timeout = 64, 30.0  # no pool (SQLite, or connections per request): barely bounded
            if isinstance(pool, dict):
                size, timeout = int(pool.get("max_size") or 4), float(pool.get("timeout") or 30)
            _slots = (threading.BoundedSemaphore(size), timeout)
        return _slots


def _release_connections() -> None:
    """Give this thread's database connections back (to the pool, when there is one), except one in a transaction."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and not connection.in_atomic_block:
            connection.close()


@contextmanager
def redemption_slot() -> Iterator[None]:
    """Hold one of the process's redemption slots for the block (see the module docstring).

    :raises SlotUnavailable: none was free within the database pool's ``timeout``.
    """
    semaphore, timeout = _pool_slots()
    if not semaphore.acquire(blocking=False):
        # Wait holding no database connection: one this request took before (the client or the
        # trust rules loaded on a cold worker) would be missing to the requests in the slots.
        _release_connections()
        if not semaphore.acquire(timeout=timeout):
            logger.warning("answering 503: no redemption slot free within %g s", timeout)
            raise SlotUnavailable("no free redemption slot")
    try:
        yield
    finally:
        semaphore.release()
