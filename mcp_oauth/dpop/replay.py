"""A DPoP proof is accepted once (RFC 9449 §11.1): its ``jti`` is remembered, per key, in the
shared token cache (``MCP_OAUTH["TOKEN_CACHE"]``) for as long as the proof could still pass
the ``iat`` check, so a replay is refused on every worker that shares the cache. The event-loop
path records it in the same round trip as its token lookup
(:func:`mcp_oauth.resource_server.cache.aadd_and_get_many`).

The entry is written with ``cache.add`` (Redis ``SET NX``): of two requests carrying the same
proof, exactly one wins. A cache outage is not a pass: the error propagates and the request is
answered 503 (:mod:`mcp_oauth.shared.overload`), as for any other unavailable dependency.
"""

from __future__ import annotations

import hashlib

from django.core.cache import caches

from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["JTI_PREFIX", "jti_key", "jti_window", "remember_jti"]

JTI_PREFIX = "mcp_oauth:dpop:jti:"


def jti_key(jkt: str, jti: str) -> str:
    """The cache key of a proof's ``jti`` for the key ``jkt`` (fixed length: a hash of both)."""
    return JTI_PREFIX + hashlib.sha256(f"{jkt}\x00{jti}".encode()).hexdigest()


def jti_window() -> int:
    """How long a ``jti`` must be remembered (seconds): the whole ``iat`` window, plus one."""
    return int(mcp_oauth_settings.DPOP_PROOF_MAX_AGE_SECONDS) + int(mcp_oauth_settings.DPOP_PROOF_LEEWAY_SECONDS) + 1


def remember_jti(jkt: str, jti: str) -> bool:
    """Record the proof ``(jkt, jti)``; False when it was recorded before (a replay).

    :raises: the cache backend's connection errors (an outage refuses the request).
    """
    return bool(caches[mcp_oauth_settings.TOKEN_CACHE].add(jti_key(jkt, jti), 1, timeout=jti_window()))
