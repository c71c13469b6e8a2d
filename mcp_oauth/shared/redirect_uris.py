"""Redirect URI matching (OAuth 2.1 §4.1.1 / RFC 9700 §4.1.3: exact string comparison).

The requested URI must equal a registered one character for character, the one
exception being the port of a loopback redirect URI (``http://127.0.0.1``,
``http://[::1]``, ``http://localhost``), which may be any (RFC 8252 §7.3).

Plain ``http`` is acceptable for a redirect URI on a loopback host only (RFC 8252 §7.3,
RFC 9700 §2.1): :func:`redirect_scheme_allowed` is that rule. DOT's own
``ALLOWED_REDIRECT_URI_SCHEMES`` keeps ``http`` for those loopback URIs, and this module
refuses it everywhere else (registration, CIMD documents, the admin form, the
authorization request), which is why the app replaces DOT's redirect-scheme deploy check
(see :mod:`mcp_oauth.checks`).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from oauth2_provider.settings import oauth2_settings

from mcp_oauth.shared.loopback import is_loopback_host

_LOOPBACK_PORT = re.compile(r"^(http://(?:127\.0\.0\.1|\[::1\]|localhost))(?::\d{1,5})?(?=[/?]|$)")


def _without_loopback_port(uri: str) -> str | None:
    match = _LOOPBACK_PORT.match(uri)
    return None if match is None else match.group(1) + uri[match.end() :]


def redirect_uri_registered(uri: str, registered: list[str]) -> bool:
    """Whether ``uri`` equals a URI of ``registered`` exactly (loopback: any port)."""
    if "#" in uri:
        return False
    if uri in registered:
        return True
    portless = _without_loopback_port(uri)
    if portless is None:
        return False
    return any(_without_loopback_port(candidate) == portless for candidate in registered)


def redirect_scheme_allowed(uri: str) -> bool:
    """Whether ``uri``'s scheme is acceptable for a redirect URI: ``https``, ``http`` on a loopback
    host only, or another scheme the site lists in ``OAUTH2_PROVIDER["ALLOWED_REDIRECT_URI_SCHEMES"]``
    (a native app's private-use scheme, RFC 8252 §7.1). Malformed URIs are not allowed."""
    try:
        parts = urlsplit(uri or "")
        scheme = parts.scheme.lower()
        if scheme == "http":
            return is_loopback_host(parts.hostname)
    except ValueError:
        return False
    return scheme == "https" or scheme in {s.lower() for s in oauth2_settings.ALLOWED_REDIRECT_URI_SCHEMES}
