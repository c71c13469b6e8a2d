"""Which IP addresses the CIMD fetcher may connect to (draft-ietf-oauth-client-id-metadata-document-00 §6.5, SSRF).

Used by the fetcher (:mod:`mcp_oauth.authorization_server.cimd.fetcher`, every address a host resolves to) and by the
client_id URL rules (:mod:`mcp_oauth.authorization_server.cimd.metadata_document`, an IP-literal host).
"""

from __future__ import annotations

import ipaddress

from requests_hardened.ip_filter import InvalidIPAddress, get_ip_address

from mcp_oauth.authorization_server.cimd.errors import AddressRefused

__all__ = ["vet_address"]


def vet_address(address: str, *, allow_loopback: bool = False) -> str:
    """Return ``address`` if the fetcher may connect to it, else raise :class:`AddressRefused`.

    The library check is requests-hardened's (``requests_hardened.ip_filter``): it
    decodes IPv4-mapped IPv6 addresses and refuses ``is_private`` (loopback,
    RFC 1918, link-local incl. the 169.254.169.254 metadata address, ``0.0.0.0/8``,
    reserved, documentation, ``fc00::/7``, ``fe80::/10``), multicast, CGNAT
    ``100.64.0.0/10``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16`` and other
    translation ranges. The standard library then has to agree that the address is
    globally routable and neither reserved nor IPv6 site-local (this catches, e.g.,
    IPv4-compatible ``::127.0.0.1``). ``allow_loopback`` (tests only) lets
    ``127.0.0.0/8`` and ``::1`` through and nothing else.

    :param address: an IP address literal as ``getaddrinfo`` returns it.
    :raises AddressRefused: with ``detail={"address": address}``.
    """
    refused = AddressRefused(
        "The client_id host resolves to a local, private or reserved address.",
        reason="non_public_address",
        detail={"address": address},
    )
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        raise refused from None
    try:
        checked, _port = get_ip_address(str(ip), 443, allow_loopback=allow_loopback)
    except (InvalidIPAddress, OSError, ValueError):
        raise refused from None
    if allow_loopback and checked.is_loopback:
        return str(checked)
    if not checked.is_global or checked.is_reserved or checked.is_multicast or getattr(checked, "is_site_local", False):
        raise refused
    # An IPv4-mapped address is connected to as the IPv4 address it carries.
    return str(checked)
