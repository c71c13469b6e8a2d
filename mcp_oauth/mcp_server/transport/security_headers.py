"""The security headers of an API response served outside Django's middleware stack (the lanes)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http.response import HttpResponseBase, ResponseHeaders

__all__ = ["add_security_headers"]

_UNSET = object()

#: ``(settings values, [(lower-case name, (name, value)), ...])``: the header list of the last
#: settings seen, checked (identity) on every call, so that a settings change is honoured at once.
_computed: tuple[tuple[Any, Any, Any], list[tuple[str, tuple[str, str]]]] | None = None


def _headers(nosniff: Any, policy: Any, coop: Any) -> list[tuple[str, tuple[str, str]]]:
    headers: dict[str, str] = {}
    if nosniff:
        headers["X-Content-Type-Options"] = "nosniff"
    if policy:
        headers["Referrer-Policy"] = policy if isinstance(policy, str) else ",".join(policy)
    if coop:
        headers["Cross-Origin-Opener-Policy"] = coop
    # Through ResponseHeaders once: the same charset checks and conversions as a header set one by one.
    return list(ResponseHeaders(headers)._store.items())


def add_security_headers(response: HttpResponseBase) -> None:
    """Add what ``SecurityMiddleware`` adds to every response, as far as it concerns an API:
    ``X-Content-Type-Options``, ``Referrer-Policy`` and ``Cross-Origin-Opener-Policy``, from the
    same settings (``SECURE_CONTENT_TYPE_NOSNIFF``, ``SECURE_REFERRER_POLICY``,
    ``SECURE_CROSS_ORIGIN_OPENER_POLICY``); a header the response already has is kept.

    The header list is computed once per settings values (a change is seen on the next call)."""
    global _computed
    values = (
        getattr(settings, "SECURE_CONTENT_TYPE_NOSNIFF", True),
        getattr(settings, "SECURE_REFERRER_POLICY", "same-origin"),
        getattr(settings, "SECURE_CROSS_ORIGIN_OPENER_POLICY", "same-origin"),
    )
    computed = _computed
    if computed is None or any(a is not b for a, b in zip(computed[0], values, strict=True)):
        computed = _computed = (values, _headers(*values))
    store = response.headers._store
    for lower, item in computed[1]:
        if lower not in store:
            store[lower] = item
