"""Identical dynamic registrations from one address: a budget, then 429 (issue #28).

A public registration endpoint meets floods of the same client registering again and again
(one public server saw 1.4 million registrations, about 20,000 ever used). RFC 7591 §3.2.1
gives every registration its own ``client_id`` and registration access token, so identical
registrations are **not** de-duplicated into one client: handing the first registrant's
client (and a new registration access token for it) to whoever sends the same body from the
same address — another user behind the same NAT — would let them rewrite or delete it
(RFC 7592). Instead each one is counted against a budget per caller address and client
software, ``MCP_OAUTH["THROTTLE_RATES"]["register_identical"]`` (default ``"10/hour"``;
``None`` switches it off). Over it: HTTP 429 ``slow_down`` with ``Retry-After`` (RFC 6585 §4,
RFC 9110 §10.2.3), rendered like every throttle of :mod:`mcp_oauth.shared.throttling`.
A client that registers once and keeps its ``client_id`` never meets it.

The client software is named by ``software_id`` and ``software_version`` when the body gives
a ``software_id`` (RFC 7591 §2), else by ``client_name``, the set of ``redirect_uris``, the
accepted grant types and ``token_endpoint_auth_method``. Only registrations that passed every
check are counted: a refused body uses none of the budget.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.http import HttpRequest

from mcp_oauth.errors import OAuthError
from mcp_oauth.shared import throttling

#: The ``THROTTLE_RATES`` scope of identical registrations.
SCOPE = "register_identical"


def registration_fingerprint(metadata: dict[str, Any]) -> str:
    """A stable digest (64 hex characters) naming the client software of a registration body.

    ``metadata``: the registration's members (RFC 7591 §2) with the accepted values merged over
    the requested ones. ``software_id`` + ``software_version`` when ``software_id`` is a
    non-empty string; else ``client_name``, sorted ``redirect_uris``, sorted ``grant_types``
    (default ``authorization_code``) and ``token_endpoint_auth_method`` (default
    ``client_secret_basic``). Other members (``scope``, ``logo_uri``, …) do not count.
    """
    software_id = metadata.get("software_id")
    if isinstance(software_id, str) and software_id:
        parts: list[Any] = ["software", software_id, str(metadata.get("software_version") or "")]
    else:
        redirect_uris = metadata.get("redirect_uris") or []
        grant_types = metadata.get("grant_types") or ["authorization_code"]
        parts = [
            "client",
            str(metadata.get("client_name") or ""),
            sorted(str(uri) for uri in redirect_uris) if isinstance(redirect_uris, list) else [],
            sorted({str(grant) for grant in grant_types}) if isinstance(grant_types, list) else [],
            str(metadata.get("token_endpoint_auth_method") or "client_secret_basic"),
        ]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True).encode()).hexdigest()


def enforce_identical_budget(request: HttpRequest, metadata: dict[str, Any]) -> None:
    """Count this registration against its caller's budget for the same client software.

    :raises OAuthError: 429 ``slow_down`` with ``Retry-After`` (seconds to the end of the
        budget's window) once the caller registered the same software ``n`` times in the window
        of ``THROTTLE_RATES["register_identical"]``.
    """
    retry_after = throttling.check(request, SCOPE, registration_fingerprint(metadata))
    if retry_after is not None:
        raise OAuthError(
            "slow_down",
            f"Too many identical registrations from this address; retry after {retry_after} seconds.",
            status=429,
            retry_after=retry_after,
        )
