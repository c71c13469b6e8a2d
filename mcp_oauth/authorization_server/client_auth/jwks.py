"""Public keys of JWT assertion signers: inline JWK Sets and ``jwks_uri`` documents, fetched safely and cached.

A ``jwks_uri`` (a client's, RFC 7591 §2; an enterprise IdP's) is fetched by the CIMD fetcher
(:class:`mcp_oauth.authorization_server.cimd.fetcher.SafeMetadataFetcher`) with the same SSRF rules as client metadata
documents: https only, a DNS host name, every resolved address vetted (no loopback, private,
link-local, metadata or translation ranges), no redirect, no proxy, bounded size and time. The
keys are cached in ``MCP_OAUTH["JWKS_CACHE"]`` for the response's freshness lifetime (clamped like
CIMD documents); a ``kid`` the cached set does not hold refetches at most once per
``MCP_OAUTH["JWKS_REFETCH_SECONDS"]`` (key rotation, RFC 7517 §4.5), and a failed fetch is
remembered for as long, so neither unknown ``kid`` values nor an unreachable or refused host make
the server fetch on every request.

A key set is accepted only when it is ``{"keys": [object, ...]}`` of at most
``MCP_OAUTH["JWKS_MAX_KEYS"]`` keys, without private or symmetric key members (RFC 7518 §6.2.2,
§6.3.2, §6.4.1), read by the strict reader (:mod:`mcp_oauth.shared.strict_json`: no
``NaN``/``Infinity``, no duplicate member, no NUL, identifier members such as ``kid`` and ``kty``
strings without control characters). A fetched set may be up to ``MCP_OAUTH["JWKS_MAX_SIZE"]``
bytes (its own limit, not the client metadata document's: an identity provider publishes several
keys with ``x5c`` certificate chains).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from django.core.cache import caches

from mcp_oauth.authorization_server.cimd.errors import CIMDRefused
from mcp_oauth.authorization_server.cimd.fetcher import SafeMetadataFetcher
from mcp_oauth.authorization_server.cimd.metadata_document import PRIVATE_JWK_MEMBERS
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.strict_json import StrictJSONError, check_jose_members

CACHE_PREFIX = "mcp_oauth:jwks:"


class KeysUnavailable(Exception):
    """No usable key set: the inline set is malformed, or the ``jwks_uri`` could not be fetched.

    ``str()`` is safe to show to the client; ``reason`` is a stable code for the audit log
    (the CIMD fetcher's reason, e.g. ``address_refused``, or ``jwks``).
    """

    def __init__(self, message: str, reason: str = "jwks") -> None:
        super().__init__(message)
        self.reason = reason


def checked_key_set(value: Any) -> list[dict[str, Any]]:
    """The ``keys`` of a JWK Set (RFC 7517 §5), refused if malformed or holding private key material.

    :raises KeysUnavailable: not ``{"keys": [object, ...]}``, more than ``JWKS_MAX_KEYS`` keys, a
        key the strict reader refuses (a non-finite number, NUL, a ``kid`` with control
        characters ...), or a key has ``d``, ``k``, ``p`` ….
    """
    keys = value.get("keys") if isinstance(value, dict) else None
    if not isinstance(keys, list) or not all(isinstance(key, dict) for key in keys):
        raise KeysUnavailable("The signer's key set is not a JSON Web Key Set.")
    limit = int(mcp_oauth_settings.JWKS_MAX_KEYS)
    if len(keys) > limit:
        raise KeysUnavailable(f"The signer's key set holds more than {limit} keys.", reason="too_many_keys")
    try:
        for key in keys:
            check_jose_members(key)
    except StrictJSONError as exc:
        raise KeysUnavailable(f"The signer's key set is refused: {exc}.") from None
    if any(PRIVATE_JWK_MEMBERS & set(key) for key in keys):
        raise KeysUnavailable("The signer's key set holds private or symmetric key material.")
    return keys


def _cache_key(uri: str) -> str:
    return CACHE_PREFIX + hashlib.sha256(uri.encode("utf-8")).hexdigest()


def fetch_key_set(uri: str) -> tuple[list[dict[str, Any]], int]:
    """GET ``uri`` with the CIMD fetcher's SSRF rules (at most ``JWKS_MAX_SIZE`` bytes);
    ``(keys, max_age_seconds)``.

    :raises KeysUnavailable: refused address, fetch failure (``too_large``: "The key set is larger
        than N bytes."), not a public JWK Set.
    """
    try:
        result = SafeMetadataFetcher().fetch_document(uri, max_size=int(mcp_oauth_settings.JWKS_MAX_SIZE))
    except CIMDRefused as refused:
        message = str(refused).replace("client_id", "jwks_uri").replace("metadata document", "key set")
        raise KeysUnavailable(message, reason=refused.reason) from None
    return checked_key_set(result.document), result.max_age


def keys_from_uri(uri: str, kid: str | None = None) -> list[dict[str, Any]]:
    """The keys at ``uri``, from the cache when fresh; refetched when ``kid`` is not among them
    (at most once per ``JWKS_REFETCH_SECONDS``).

    :raises KeysUnavailable: see :func:`fetch_key_set`.
    """
    cache = caches[mcp_oauth_settings.JWKS_CACHE]
    key = _cache_key(uri)
    interval = float(mcp_oauth_settings.JWKS_REFETCH_SECONDS)
    failed = cache.get(key + ":failed")
    if failed is not None:  # a failed fetch is not repeated for JWKS_REFETCH_SECONDS
        raise KeysUnavailable(failed[0], reason=failed[1])
    entry = cache.get(key)
    if entry is not None:
        keys, fetched_at = entry
        missing = kid is not None and not any(k.get("kid") == kid for k in keys)
        if not missing or time.time() - fetched_at < interval:
            return list(keys)
    try:
        keys, max_age = fetch_key_set(uri)
    except KeysUnavailable as exc:
        if interval >= 1:
            cache.set(key + ":failed", (str(exc), exc.reason), timeout=int(interval))
        raise
    cache.set(key, (keys, time.time()), timeout=max(1, int(max_age)))
    return keys


def forget(uri: str) -> None:
    """Drop the cached key set (and any remembered failure) of ``uri`` (after an administrator changed it)."""
    caches[mcp_oauth_settings.JWKS_CACHE].delete_many([_cache_key(uri), _cache_key(uri) + ":failed"])


def signer_keys(jwks: Any, jwks_uri: str, kid: str | None = None) -> list[dict[str, Any]]:
    """The public keys of a signer registered with an inline ``jwks`` or a ``jwks_uri`` (inline wins).

    :raises KeysUnavailable: neither is set, or the one that is cannot be used.
    """
    if jwks:
        return checked_key_set(jwks)
    if jwks_uri:
        return keys_from_uri(jwks_uri, kid)
    raise KeysUnavailable("No public keys are registered for this signer.", reason="no_keys")
