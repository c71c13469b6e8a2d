"""A DPoP proof is accepted once (RFC 9449 §11.1): its ``jti`` is remembered, per key, in the
shared token cache (``MCP_OAUTH["TOKEN_CACHE"]``) for as long as the proof could still pass
the ``iat`` check, so a replay is refused on every worker that shares the cache.

The entry is written with ``cache.add`` (Redis ``SET NX``): of two requests carrying the same
proof, exactly one wins. A cache outage is not a pass: the error propagates and the request is
answered 503 (:mod:`mcp_oauth.overload`), as for any other unavailable dependency.
"""

from __future__ import annotations

import hashlib

from django.core.cache import caches
from django.core.cache.backends.locmem import LocMemCache

from ..settings import mcp_oauth_settings

__all__ = ["JTI_PREFIX", "aremember_jti", "jti_key", "remember_jti"]

JTI_PREFIX = "mcp_oauth:dpop:jti:"


def jti_key(jkt: str, jti: str) -> str:
    """The cache key of a proof's ``jti`` for the key ``jkt`` (fixed length: a hash of both)."""
    return JTI_PREFIX + hashlib.sha256(f"{jkt}\x00{jti}".encode()).hexdigest()


def _window() -> int:
    """How long a ``jti`` must be remembered (seconds): the whole ``iat`` window, plus one."""
    return int(mcp_oauth_settings.DPOP_PROOF_MAX_AGE_SECONDS) + int(mcp_oauth_settings.DPOP_PROOF_LEEWAY_SECONDS) + 1


def remember_jti(jkt: str, jti: str) -> bool:
    """Record the proof ``(jkt, jti)``; False when it was recorded before (a replay).

    :raises: the cache backend's connection errors (an outage refuses the request).
    """
    return bool(caches[mcp_oauth_settings.TOKEN_CACHE].add(jti_key(jkt, jti), 1, timeout=_window()))


async def aremember_jti(jkt: str, jti: str) -> bool | None:
    """:func:`remember_jti` from the event loop, without a thread hop: one ``SET NX`` with a
    backend that has native async writes (:class:`mcp_oauth.redis_cache.RedisCache`), a plain
    ``add`` with the in-process backend.

    :returns: True (recorded), False (a replay), or None when this backend cannot be written
        from the event loop (nothing was recorded: call :func:`remember_jti` in a thread).
    """
    cache = caches[mcp_oauth_settings.TOKEN_CACHE]
    add_raw = getattr(cache, "aadd_raw", None)
    if add_raw is not None:
        return bool(await add_raw(jti_key(jkt, jti), b"1", _window()))
    if isinstance(cache, LocMemCache):
        return bool(cache.add(jti_key(jkt, jti), 1, timeout=_window()))
    return None
