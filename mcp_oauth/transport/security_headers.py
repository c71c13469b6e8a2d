"""The security headers of an API response served outside Django's middleware stack (the lanes)."""

from __future__ import annotations

from django.conf import settings
from django.http.response import HttpResponseBase

__all__ = ["add_security_headers"]


def add_security_headers(response: HttpResponseBase) -> None:
    """Add what ``SecurityMiddleware`` adds to every response, as far as it concerns an API:
    ``X-Content-Type-Options``, ``Referrer-Policy`` and ``Cross-Origin-Opener-Policy``, from the
    same settings (``SECURE_CONTENT_TYPE_NOSNIFF``, ``SECURE_REFERRER_POLICY``,
    ``SECURE_CROSS_ORIGIN_OPENER_POLICY``); a header the response already has is kept."""
    if getattr(settings, "SECURE_CONTENT_TYPE_NOSNIFF", True):
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
    policy = getattr(settings, "SECURE_REFERRER_POLICY", "same-origin")
    if policy:
        value = policy if isinstance(policy, str) else ",".join(policy)
        response.headers.setdefault("Referrer-Policy", value)
    coop = getattr(settings, "SECURE_CROSS_ORIGIN_OPENER_POLICY", "same-origin")
    if coop:
        response.headers.setdefault("Cross-Origin-Opener-Policy", coop)
