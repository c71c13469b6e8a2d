"""Redirect URI matching (OAuth 2.1 §4.1.1 / RFC 9700 §4.1.3: exact string comparison).

The requested URI must equal a registered one character for character, the one
exception being the port of a loopback redirect URI (``http://127.0.0.1``,
``http://[::1]``, ``http://localhost``), which may be any (RFC 8252 §7.3).
"""

from __future__ import annotations

import re

_LOOPBACK_PORT = re.compile(r"^(http://(?:127\.0\.0\.1|\[::1\]|localhost))(?::\d{1,5})?(?=[/?]|$)")


def _without_loopback_port(uri: str) -> str | None:
    match = _LOOPBACK_PORT.match(uri)
    return None if match is None else match.group(1) + uri[match.end():]


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
