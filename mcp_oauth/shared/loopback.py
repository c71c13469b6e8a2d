"""Loopback hosts: the one place where plain http is acceptable (RFC 8252 §7.3, §8.3)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_https_or_loopback", "is_loopback_host"]


def is_loopback_host(host: str | None) -> bool:
    """``localhost`` or a loopback IP literal (RFC 8252 §7.3, §8.3)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_https_or_loopback(url: str) -> bool:
    """An https URL with a host, or an http URL on a loopback host."""
    parts = urlsplit(url or "")
    if parts.scheme == "https":
        return bool(parts.hostname)
    return parts.scheme == "http" and is_loopback_host(parts.hostname)
