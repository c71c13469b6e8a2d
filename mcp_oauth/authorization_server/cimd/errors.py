"""Why a client ID metadata document was refused.

Every refusal is a :class:`CIMDRefused` (a subclass of DOT's
:class:`oauth2_provider.cimd.CIMDError`, so a fetcher written for DOT's
``CIMD_METADATA_FETCHER`` interface may raise either). Its ``str()`` is a short
sentence that is safe to show to the user and the client: it names the rule that
was broken, never an internal address that was reached or a raw exception text.
``reason`` is a stable machine-readable code for logs and the audit log, and
``error`` the OAuth error code the endpoints answer with (RFC 6749 §4.1.2.1, §5.2).
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.cimd import CIMDError


class CIMDRefused(CIMDError):
    """A CIMD client_id could not be turned into a usable client.

    :param message: safe-to-show explanation.
    :param reason: stable code, e.g. ``"http_status"``, ``"too_large"``.
    :param detail: extra non-secret facts for the audit log (``{"status": 404}``).
    """

    error = "invalid_client"
    reason = "refused"
    audit_kind: str | None = "cimd.fetch_failed"

    def __init__(self, message: str, *, reason: str | None = None, detail: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        if reason:
            self.reason = reason
        self.detail = dict(detail or {})


class InvalidClientIdURL(CIMDRefused):
    """The client_id is not an acceptable CIMD URL (draft §3): nothing was fetched."""

    error = "invalid_request"
    reason = "invalid_url"
    audit_kind = None


class AddressRefused(CIMDRefused):
    """The client_id host is, or resolves to, an address the server must not reach (draft §6.5, SSRF)."""

    reason = "address_refused"
    audit_kind = "cimd.ssrf_refused"


class FetchFailed(CIMDRefused):
    """The document could not be retrieved: DNS, TLS, HTTP status, redirect, size, time, media type."""

    reason = "fetch_failed"


class InvalidDocument(CIMDRefused):
    """The document was retrieved but breaks the draft's rules (§4.1) or is not usable by this server."""

    reason = "invalid_document"


class NotPermitted(CIMDRefused):
    """``CIMD_REGISTRATION_PERMISSION_CLASSES`` (the trust policy) refused the client_id before any fetch."""

    reason = "not_permitted"
    audit_kind = None


class Unavailable(CIMDRefused):
    """The fetch did not finish within ``CIMD_FETCH_WAIT_SECONDS``; it may still succeed later."""

    error = "temporarily_unavailable"
    reason = "wait_timeout"
    audit_kind = None
