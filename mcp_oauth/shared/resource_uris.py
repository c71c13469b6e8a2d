"""Protected resources: canonical URIs (RFC 8707 §2, MCP 2025-11-25 "Canonical Server URI").

The canonical form of a resource URI is: lowercase scheme (``http`` or ``https``)
and host, no default port, no fragment, no userinfo, no trailing slash. Two
spellings of the same resource (``HTTPS://Example.COM:443/mcp/``) canonicalise to
one string (``https://example.com/mcp``), which is what tokens are bound to and
what the resource server compares exactly.
"""

from __future__ import annotations

import functools
from urllib.parse import urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}


class InvalidResource(ValueError):
    """The value is not an absolute http(s) URI usable as a resource indicator."""


def canonicalize_resource(uri: str) -> str:
    """Return the canonical form of the resource URI ``uri``.

    :param uri: an absolute ``http`` or ``https`` URI.
    :returns: the canonical string (see the module docstring).
    :raises InvalidResource: not a string, whitespace or control characters,
        another scheme, no host, userinfo, a fragment (RFC 8707 §2 forbids it) or
        an invalid port.
    """
    if not isinstance(uri, str):
        raise InvalidResource("a resource must be an absolute https URI")
    return _canonicalize(uri)


@functools.lru_cache(maxsize=512)  # pure; the endpoint canonicalises its own URL on every request
def _canonicalize(uri: str) -> str:
    if not uri or any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in uri):
        raise InvalidResource("a resource must be an absolute https URI")
    if "#" in uri:
        raise InvalidResource("a resource indicator must not include a fragment (RFC 8707 §2)")
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:
        raise InvalidResource(f"invalid resource URI: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise InvalidResource("a resource must use the https (or loopback http) scheme")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise InvalidResource("a resource URI must not carry userinfo")
    host = parts.hostname
    if not host:
        raise InvalidResource("a resource URI must have a host")
    host = host.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port in (None, _DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def resource_path(uri: str) -> str:
    """Path of a canonical resource URI, "" for an origin-only resource."""
    return urlsplit(uri).path
