"""One development site, two loopback spellings: ``http://127.0.0.1:8000`` and ``http://localhost:8000``.

MCP clients compare the ``resource`` of the protected-resource metadata (RFC 9728 §3.3) with
the URL they were given, character for character: a client pointed at
``http://localhost:8000/mcp`` refuses a site whose ``BASE_URL`` is ``http://127.0.0.1:8000``
("protected resource does not match"). Both names reach the same socket on the developer's
machine, so when ``BASE_URL``'s host is itself a loopback spelling (``localhost``,
``127.0.0.1``, ``[::1]``) and ``MCP_OAUTH["LOOPBACK_ALIASES"]`` is on (the default), the other
spellings with the same scheme and port name the same site:

* the metadata and the ``WWW-Authenticate`` challenge answer in the spelling the request used
  (:func:`as_requested`);
* a ``resource`` parameter in another loopback spelling designates the same registered
  resource (:func:`base_spelling`), so the token is bound, as always, to that one resource
  (its canonical URI, in ``BASE_URL``'s spelling) and is accepted at that resource under either
  spelling, and nowhere else.

The issuer and every other published URL stay in ``BASE_URL``'s spelling. A site whose
``BASE_URL`` is not a loopback origin (any production site) is not affected: other hosts,
loopback or not, remain foreign resources (``invalid_target``).

The aliasing trusts that the three spellings reach this one server, as they do when it
listens on them (or when only it listens on that port). Another local process listening on
another spelling of the same port (``[::1]:8000`` next to this server's ``127.0.0.1:8000``) could
send a client here for a token naming its own spelling, get this site's token with the user's
consent, and replay it here: turn ``LOOPBACK_ALIASES`` off on a machine shared with processes
you do not trust.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest

from mcp_oauth.settings import mcp_oauth_settings

__all__ = ["LOOPBACK_SPELLINGS", "as_requested", "base_spelling", "loopback_aliases_enabled"]

#: The loopback host spellings that alias one another (canonical form: lowercase, IPv6 bracketed).
LOOPBACK_SPELLINGS = ("localhost", "127.0.0.1", "[::1]")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(scheme: str, netloc: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` with the host in canonical spelling; None when malformed."""
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        port = parts.port
    except ValueError:
        return None
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    scheme = scheme.lower()
    return scheme, host, port or _DEFAULT_PORTS.get(scheme, 0)


def _base_origin() -> tuple[str, str, int] | None:
    parts = urlsplit(mcp_oauth_settings.base_url)
    return _origin(parts.scheme, parts.netloc)


def loopback_aliases_enabled() -> bool:
    """Whether ``BASE_URL``'s host is a loopback spelling and ``LOOPBACK_ALIASES`` is on."""
    if not mcp_oauth_settings.LOOPBACK_ALIASES or not mcp_oauth_settings.BASE_URL:
        return False
    base = _base_origin()
    return base is not None and base[1] in LOOPBACK_SPELLINGS


def _alias_of_base(origin: tuple[str, str, int] | None) -> bool:
    """``origin`` is another loopback spelling of ``BASE_URL``'s origin (same scheme and port)."""
    if origin is None or not loopback_aliases_enabled():
        return False
    base = _base_origin()
    assert base is not None
    return origin != base and origin[0] == base[0] and origin[2] == base[2] and origin[1] in LOOPBACK_SPELLINGS


def base_spelling(uri: str) -> str:
    """``uri`` with its origin written as ``BASE_URL``'s when it is another loopback spelling of it;
    any other ``uri`` unchanged (see the module docstring)."""
    parts = urlsplit(uri)
    if not _alias_of_base(_origin(parts.scheme, parts.netloc)):
        return uri
    base = urlsplit(mcp_oauth_settings.base_url)
    return urlunsplit((base.scheme, base.netloc, parts.path, parts.query, parts.fragment))


def as_requested(uri: str, request: HttpRequest | None) -> str:
    """``uri`` (in ``BASE_URL``'s spelling) written with the loopback spelling ``request`` used, when
    that spelling is an alias of ``BASE_URL``'s origin; else ``uri`` unchanged."""
    if request is None or not loopback_aliases_enabled():
        return uri
    try:
        host = request.get_host()
    except DisallowedHost:
        return uri
    origin = _origin(request.scheme or "http", host)
    parts = urlsplit(uri)
    if not _alias_of_base(origin) or _origin(parts.scheme, parts.netloc) != _base_origin():
        return uri
    assert origin is not None
    netloc = origin[1] if origin[2] == _DEFAULT_PORTS.get(origin[0]) else f"{origin[1]}:{origin[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
