"""Server-provided DPoP nonces (RFC 9449 §8, §9), without shared state.

A nonce is an HMAC (keyed with ``SECRET_KEY``, :func:`django.utils.crypto.salted_hmac`) of the
current time slot of ``DPOP_NONCE_LIFETIME_SECONDS``: every worker makes and accepts the same
ones, nothing is stored, and a nonce stays valid for one to two slots (the current and the
previous one are accepted). Nonces made under a key of ``SECRET_KEY_FALLBACKS`` are accepted too,
so hosts in the middle of a ``SECRET_KEY`` rotation accept each other's.
"""

from __future__ import annotations

import base64
import hmac
import time
from functools import lru_cache

from django.conf import settings
from django.utils.crypto import salted_hmac

from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["new_nonce", "nonce_valid"]


@lru_cache(maxsize=16)
def _nonce_of(slot: int, secret: str) -> str:
    digest = salted_hmac("mcp_oauth.dpop.nonce", str(slot), secret=secret, algorithm="sha256").digest()[:24]
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _slot(now: float) -> int:
    return int(now // max(1, int(mcp_oauth_settings.DPOP_NONCE_LIFETIME_SECONDS)))


def _secrets() -> tuple[str, ...]:
    """``SECRET_KEY`` (makes nonces) then ``SECRET_KEY_FALLBACKS`` (their nonces are still accepted:
    a key rotated host by host, docs/how-to/many-hosts.md)."""
    fallbacks = getattr(settings, "SECRET_KEY_FALLBACKS", None) or ()
    return tuple(str(secret) for secret in (settings.SECRET_KEY, *fallbacks))


def new_nonce(now: float | None = None) -> str:
    """The nonce to send in ``DPoP-Nonce`` now (a base64url string of 32 characters)."""
    return _nonce_of(_slot(time.time() if now is None else now), str(settings.SECRET_KEY))


def nonce_valid(nonce: str, now: float | None = None) -> bool:
    """Whether ``nonce`` is the nonce of the current or the previous time slot, under ``SECRET_KEY``
    or one of ``SECRET_KEY_FALLBACKS``."""
    slot = _slot(time.time() if now is None else now)
    return any(
        hmac.compare_digest(nonce, _nonce_of(candidate, secret))
        for secret in _secrets()
        for candidate in (slot, slot - 1)
    )
