"""The site as an OAuth 2.x client of third-party authorization servers (URL-mode connections).

The MCP client's token never leaves this site (MCP "Token Passthrough"): the site runs
its own authorization code flow at the provider, with its own ``state`` and PKCE S256
(RFC 7636; RFC 9700 §2.1.1), exchanges the code server-side, and keeps the tokens
encrypted in :class:`~elicitation.models.ThirdPartyConnection`.

All functions are synchronous (ORM and ``requests``); call them with ``sync_to_async``
from async code. Every HTTP request has a timeout (``ELICITATION["HTTP_TIMEOUT_SECONDS"]``)
and follows no redirect.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import requests
from django.core.exceptions import ValidationError
from django.db import connections, router, transaction
from django.utils import timezone

from elicitation import crypto
from elicitation.crypto import DecryptionError
from elicitation.models import ThirdPartyConnection, ThirdPartyProvider, validate_endpoint_url
from elicitation.settings import elicitation_settings
from mcp_oauth import audit
from mcp_oauth.models import AuditEvent
from mcp_oauth.shared.text import storable

__all__ = [
    "AuthorizationRequest",
    "ProviderError",
    "build_authorization_request",
    "discover",
    "exchange_code",
    "fetch_json",
    "fresh_access_token",
    "revoke_connection",
    "store_connection",
]

logger = logging.getLogger("elicitation.providers")

#: Longest token-endpoint answer read (bytes).
MAX_RESPONSE_BYTES = 64 * 1024


class ProviderError(Exception):
    """The provider refused or answered badly. ``error`` is the OAuth error code when it sent one
    (``invalid_grant`` …), else a local one (``server_error``, ``invalid_response``, ``network_error``)."""

    def __init__(self, error: str, description: str = "") -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description


@dataclass(frozen=True)
class AuthorizationRequest:
    """Where to send the browser, and what the callback must check (kept server-side)."""

    url: str
    state: str
    code_verifier: str


def _pkce_pair() -> tuple[str, str]:
    """RFC 7636 §4.1-4.2: a 43-character verifier and its S256 challenge."""
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode()
    return verifier, challenge


def _with_query(url: str, params: dict[str, str]) -> str:
    parts = urlsplit(url)
    query = parts.query + ("&" if parts.query else "") + urlencode(params)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def build_authorization_request(provider: ThirdPartyProvider, scopes: list[str]) -> AuthorizationRequest:
    """The authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2) for ``scopes``.

    ``state`` is 256 random bits; the caller keeps it and the verifier in the user's
    server-side session and checks them on the callback.
    """
    state = secrets.token_urlsafe(32)
    params = {
        "response_type": "code",
        "client_id": provider.client_id,
        "redirect_uri": provider.redirect_uri,
        "state": state,
    }
    if scopes:
        params["scope"] = " ".join(scopes)
    verifier = ""
    if provider.use_pkce:
        verifier, challenge = _pkce_pair()
        params["code_challenge"] = challenge
        params["code_challenge_method"] = "S256"
    if provider.resource:
        params["resource"] = provider.resource
    return AuthorizationRequest(_with_query(provider.authorization_endpoint, params), state, verifier)


def _client_auth(provider: ThirdPartyProvider, body: dict[str, str]) -> tuple[str, str] | None:
    """Client authentication (RFC 6749 §2.3.1; Basic credentials form-encoded first)."""
    method = provider.token_endpoint_auth_method
    if method == ThirdPartyProvider.AuthMethod.CLIENT_SECRET_BASIC:
        return (quote(provider.client_id, safe=""), quote(provider.client_secret, safe=""))
    body["client_id"] = provider.client_id
    if method == ThirdPartyProvider.AuthMethod.CLIENT_SECRET_POST:
        body["client_secret"] = provider.client_secret
    return None


#: RFC 6749 §5.2 / Appendix A.7: the characters of an ``error`` code.
_ERROR_CODE_RE = re.compile(r"^[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}$")


def _error_code(value: Any) -> str:
    """The provider's ``error`` when it is a well-formed code, else ``server_error`` (never its free text)."""
    return value if isinstance(value, str) and _ERROR_CODE_RE.fullmatch(value) else "server_error"


def _interrupt(response: requests.Response) -> None:
    """Shut the socket down under a read blocked in another thread (urllib3 ≥ 2.3 ``HTTPResponse.shutdown``)."""
    try:
        response.raw.shutdown()
    except (ValueError, RuntimeError, OSError, AttributeError):
        pass


def fetch_json(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    data: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> tuple[int, Any]:
    """One HTTP request to a provider, bounded in size and time; the status and the parsed JSON body.

    No redirect is followed. The whole exchange (connect, headers, body) must end within
    ``ELICITATION["HTTP_TIMEOUT_SECONDS"]``: a watchdog closes the response at the deadline, so a
    server dripping bytes cannot hold a worker. A body larger than ``max_bytes`` (declared or
    read) is refused without reading the rest.

    :returns: ``(status, payload)``; ``payload`` is None when the body is not JSON (or is empty).
    :raises ProviderError: ``network_error`` (unreachable, too slow, cut off) or ``invalid_response``
        (too large).
    """
    timeout = float(elicitation_settings.HTTP_TIMEOUT_SECONDS)
    deadline = time.monotonic() + timeout
    try:
        response = requests.request(
            method,
            url,
            headers={"Accept": "application/json", **(headers or {})},
            data=data,
            auth=auth,
            timeout=timeout,
            allow_redirects=False,
            stream=True,
        )
    except requests.RequestException as exc:
        raise ProviderError("network_error", f"{url} unreachable ({type(exc).__name__})") from None
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _interrupt, args=(response,))
    watchdog.daemon = True
    watchdog.start()
    try:
        declared = response.headers.get("Content-Length", "")
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > max_bytes):
            raise ProviderError("invalid_response", f"answer larger than {max_bytes} bytes")
        body = bytearray()
        for chunk in response.iter_content(4096):
            body += chunk
            if len(body) > max_bytes:
                raise ProviderError("invalid_response", f"answer larger than {max_bytes} bytes")
            if time.monotonic() > deadline:
                raise ProviderError("network_error", f"answer slower than {timeout:g} s")
    except ProviderError:
        raise
    except Exception as exc:  # noqa: BLE001 - the watchdog closed the response mid-read, or the connection broke
        raise ProviderError(
            "network_error", f"answer cut off or slower than {timeout:g} s ({type(exc).__name__})"
        ) from None
    finally:
        watchdog.cancel()
        response.close()
    try:
        payload = json.loads(bytes(body)) if body else None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, NaN is fine but nesting too deep is not
        payload = None
    return response.status_code, payload


def _post_token(provider: ThirdPartyProvider, body: dict[str, str]) -> dict[str, Any]:
    """POST to the token endpoint; the checked RFC 6749 §5.1 answer.

    The answer must be a JSON object with a non-empty ``access_token`` and ``token_type``
    Bearer; every string kept (tokens, scope) must be storable text (no NUL, valid UTF-8).

    :raises ProviderError: the provider's ``error`` code (§5.2; its free text is never kept),
        ``server_error`` (an HTTP 5xx answer that is not a JSON object), or ``network_error`` /
        ``invalid_response`` (see :func:`fetch_json`; not a token response).
    """
    auth = _client_auth(provider, body)
    status, payload = fetch_json("POST", provider.token_endpoint, data=body, auth=auth)
    if not isinstance(payload, dict):  # a 5xx page is the provider's own failure (RFC 6749 §4.1.2.1 server_error)
        raise ProviderError(
            "server_error" if status >= 500 else "invalid_response",
            f"token endpoint answered HTTP {status} without a JSON object",
        )
    if status != 200 or "error" in payload:
        raise ProviderError(_error_code(payload.get("error")), f"HTTP {status}")
    token = payload.get("access_token")
    if not isinstance(token, str) or not token or len(token) > 8192 or not storable(token):
        raise ProviderError("invalid_response", "no usable access_token in the token response")
    if str(payload.get("token_type", "")).lower() != "bearer":
        raise ProviderError("invalid_response", "token_type is not Bearer")
    refresh = payload.get("refresh_token")
    if refresh is not None and (not isinstance(refresh, str) or len(refresh) > 8192 or not storable(refresh)):
        payload["refresh_token"] = None  # unusable: kept as no refresh token (the user reconnects on expiry)
    scope = payload.get("scope")
    if scope is not None and (not isinstance(scope, str) or not storable(scope)):
        payload["scope"] = None  # RFC 6749 §5.1: absent means as requested; an unusable one counts as absent
    return payload


def exchange_code(provider: ThirdPartyProvider, code: str, code_verifier: str) -> dict[str, Any]:
    """Redeem an authorization code (RFC 6749 §4.1.3, RFC 7636 §4.5).

    :returns: the token response (``access_token``, ``token_type``, ``expires_in``?, ``refresh_token``?, ``scope``?).
    :raises ProviderError: see :func:`_post_token`.
    """
    body = {"grant_type": "authorization_code", "code": code, "redirect_uri": provider.redirect_uri}
    if code_verifier:
        body["code_verifier"] = code_verifier
    if provider.resource:
        body["resource"] = provider.resource
    return _post_token(provider, body)


def _account_label(provider: ThirdPartyProvider, access_token: str) -> str:
    """A short account name from ``userinfo_endpoint`` ("" when there is none or it fails)."""
    if not provider.userinfo_endpoint:
        return ""
    try:
        status, data = fetch_json(
            "GET", provider.userinfo_endpoint, headers={"Authorization": f"Bearer {access_token}"}
        )
    except ProviderError:
        return ""
    if status != 200 or not isinstance(data, dict):
        return ""
    for claim in ("email", "preferred_username", "username", "name", "login", "sub"):
        value = data.get(claim)
        if isinstance(value, str) and value.strip() and storable(value):
            return value.strip()[:200]
    return ""


#: Longest access-token lifetime believed (seconds); a larger or odd ``expires_in`` is clamped.
MAX_LIFETIME_SECONDS = 10 * 365 * 86400


def _expiry(payload: dict[str, Any]) -> Any:
    """``expires_at`` from ``expires_in`` (RFC 6749 §5.1: seconds); None when absent or unusable."""
    expires_in = payload.get("expires_in")
    if isinstance(expires_in, bool) or not isinstance(expires_in, (int, float)):
        return None
    try:
        seconds = float(expires_in)
    except OverflowError:  # an integer too large for a float
        seconds = float(MAX_LIFETIME_SECONDS)
    if math.isnan(seconds):
        return None
    if seconds <= 0:  # already expired: refreshed (or asked for again) on next use
        return timezone.now()
    return timezone.now() + timedelta(seconds=min(seconds, MAX_LIFETIME_SECONDS))


def store_connection(
    user: Any,
    provider: ThirdPartyProvider,
    payload: dict[str, Any],
    requested: list[str],
    organization_id: Any = None,
) -> ThirdPartyConnection:
    """Create or replace ``user``'s connection to ``provider`` from a token response, encrypted.

    Granted scopes: the response's ``scope``, or the requested ones when it has none
    (RFC 6749 §5.1). ``organization_id``: the organization the asking request acted for; a new
    connection is stamped with it, one made for another organization (or none) is left for none
    (it serves more than one: :func:`elicitation.receivers.organization_member_removed` keeps it).
    """
    scope = payload.get("scope")
    granted = scope.split() if isinstance(scope, str) else list(requested)
    label = _account_label(provider, payload["access_token"])
    with transaction.atomic():
        connection = ThirdPartyConnection.objects.select_for_update().filter(user=user, provider=provider).first()
        if connection is None:
            connection = ThirdPartyConnection(user=user, provider=provider, organization_id=organization_id)
        elif connection.organization_id != organization_id:
            connection.organization_id = None
        connection.access_token = payload["access_token"]
        refresh_token = payload.get("refresh_token")
        connection.refresh_token = refresh_token if isinstance(refresh_token, str) else ""
        connection.token_type = "Bearer"
        connection.expires_at = _expiry(payload)
        connection.scopes = " ".join(dict.fromkeys(granted))[:500]
        connection.account_label = label or connection.account_label
        connection.save()
    return connection


#: ``last_used_at`` is written at most this often per connection (seconds), to keep tool calls cheap.
TOUCH_INTERVAL_SECONDS = 60


def _is_fresh(connection: ThirdPartyConnection) -> bool:
    margin = timedelta(seconds=float(elicitation_settings.REFRESH_MARGIN_SECONDS))
    return connection.expires_at is None or connection.expires_at - margin > timezone.now()


def fresh_access_token(connection: ThirdPartyConnection) -> str | None:
    """The connection's access token, refreshed first when it is (nearly) expired.

    A valid token costs one read (and a ``last_used_at`` write at most once a minute).
    Refreshing (RFC 6749 §6) locks the row, so concurrent calls refresh once and a rotating
    provider's new refresh token is never lost. When the provider refuses the refresh
    (``invalid_grant``…), there is no refresh token, or the tokens no longer decrypt, the
    connection is deleted (audit ``connection.revoked``) and None is returned: the user must
    connect again. Network failures raise.

    :raises ProviderError: ``network_error`` / ``invalid_response`` / ``server_error``
        (the connection is kept; try again later).
    """
    row = ThirdPartyConnection.objects.select_related("provider", "user").filter(pk=connection.pk).first()
    if row is None:
        return None
    if _is_fresh(row):
        try:
            token = row.access_token
        except DecryptionError:
            logger.error("third-party connection %s cannot be decrypted with the configured keys", row.pk)
            _drop(row, reason="undecryptable")
            return None
        now = timezone.now()
        if row.last_used_at is None or (now - row.last_used_at).total_seconds() >= TOUCH_INTERVAL_SECONDS:
            ThirdPartyConnection.objects.filter(pk=row.pk).update(last_used_at=now)
        return token
    # Lock the row where the database has row locks. SQLite has none: a transaction held across
    # the HTTP call below would lock the whole database file, and a provider sharing it (this
    # site as its own provider) could not commit the refresh: the call timed out every time.
    locking = connections[router.db_for_write(ThirdPartyConnection)].features.has_select_for_update
    with transaction.atomic() if locking else contextlib.nullcontext():
        row = (
            ThirdPartyConnection.objects.select_for_update(
                of=("self",)
            )  # not the joined user row: the provider may insert tokens that reference it
            .select_related("provider", "user")
            .filter(pk=connection.pk)
            .first()
        )
        if row is None:
            return None
        try:
            if _is_fresh(row):  # another call refreshed it while this one waited for the lock
                return row.access_token
            refresh_token = row.refresh_token
        except DecryptionError:
            logger.error("third-party connection %s cannot be decrypted with the configured keys", row.pk)
            _drop(row, reason="undecryptable")
            return None
        if not refresh_token:
            _drop(row, reason="expired")
            return None
        body = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if row.provider.resource:
            body["resource"] = row.provider.resource
        try:
            payload = _post_token(row.provider, body)
        except ProviderError as exc:
            if exc.error in {"invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope"}:
                _drop(row, reason=f"refresh refused: {exc.error}")
                return None
            raise
        row.access_token = payload["access_token"]
        if isinstance(payload.get("refresh_token"), str) and payload["refresh_token"]:
            row.refresh_token = payload["refresh_token"]
        row.expires_at = _expiry(payload)
        if isinstance(payload.get("scope"), str):
            row.scopes = payload["scope"][:500]
        row.last_used_at = timezone.now()
        row.save()
        connection.access_token_encrypted = row.access_token_encrypted
        connection.expires_at = row.expires_at
        return payload["access_token"]


def _drop(connection: ThirdPartyConnection, *, reason: str, request: Any = None, actor: Any = None) -> None:
    audit.record(
        AuditEvent.Kind.CONNECTION_REVOKED,
        request=request,
        user=connection.user,
        detail={"provider": connection.provider.slug, "reason": reason, "by": getattr(actor, "pk", None)},
    )
    connection.delete()


def forget_rejected_connection(connection_id: int | None) -> bool:
    """Delete a connection whose access token the provider refused (HTTP 401: revoked or expired
    at the provider, RFC 6750 §3.1 ``invalid_token``), with an audit ``connection.revoked``
    (reason ``rejected``). Nothing is sent to the provider: it already refuses the token.

    :returns: whether a connection was deleted (False when it was already gone).
    """
    if connection_id is None:
        return False
    connection = ThirdPartyConnection.objects.select_related("provider", "user").filter(pk=connection_id).first()
    if connection is None:
        return False
    _drop(connection, reason="rejected")
    return True


def revoke_connection(
    connection: ThirdPartyConnection, *, request: Any = None, actor: Any = None, reason: str = "revoked"
) -> None:
    """Delete the connection, after asking the provider to revoke its tokens (RFC 7009) when it can.

    Revocation at the provider is best effort: a failure there is logged, the local
    tokens are deleted anyway.
    """
    revoke_at_provider(
        connection.provider,
        [
            (connection.refresh_token_encrypted, "refresh_token"),
            (connection.access_token_encrypted, "access_token"),
        ],
    )
    with transaction.atomic():
        _drop(connection, reason=reason, request=request, actor=actor)


def revoke_at_provider(provider: ThirdPartyProvider, tokens: list[tuple[str, str]]) -> int:
    """Ask ``provider`` to revoke each ``(encrypted token, token_type_hint)`` (RFC 7009 §2.1), best
    effort: a failure is logged, never raised. Nothing is sent when the provider has no revocation
    endpoint. :returns: how many revocation requests the provider accepted."""
    if not provider.revocation_endpoint:
        return 0
    accepted = 0
    for encrypted, hint in tokens:
        if not encrypted:
            continue
        try:
            body = {"token": crypto.decrypt(encrypted), "token_type_hint": hint}
            auth = _client_auth(provider, body)
            fetch_json("POST", provider.revocation_endpoint, data=body, auth=auth)
            accepted += 1
        except (ProviderError, DecryptionError) as exc:
            logger.warning("revocation at %s failed: %r", provider.slug, getattr(exc, "error", type(exc).__name__))
    return accepted


def discover(provider: ThirdPartyProvider, *, save: bool = True) -> dict[str, Any]:
    """Fill the provider's endpoints from its RFC 8414 metadata (path-inserted well-known URI, §3.1).

    Checks that the document's ``issuer`` equals ``provider.issuer`` (§3.3) and that S256
    PKCE is supported when ``use_pkce`` is on. Saves the provider unless ``save`` is False.

    :returns: the metadata document.
    :raises ProviderError: ``network_error``, ``invalid_response`` (not JSON, issuer mismatch,
        an endpoint that is not https, no S256).
    """
    issuer = provider.issuer.rstrip("/")
    if not issuer:
        raise ProviderError("invalid_request", "the provider has no issuer to discover")
    parts = urlsplit(issuer)
    well_known = urlunsplit(
        (parts.scheme, parts.netloc, "/.well-known/oauth-authorization-server" + parts.path, "", "")
    )
    status, metadata = fetch_json("GET", well_known)
    if status != 200:
        metadata = None
    if not isinstance(metadata, dict):
        raise ProviderError("invalid_response", f"{well_known} did not answer with a metadata document")
    if str(metadata.get("issuer", "")).rstrip("/") != issuer:
        raise ProviderError(
            "invalid_response", "the metadata issuer differs from the configured issuer (RFC 8414 §3.3)"
        )
    methods = metadata.get("code_challenge_methods_supported") or []
    if provider.use_pkce and isinstance(methods, list) and methods and "S256" not in methods:
        raise ProviderError("invalid_response", "the provider does not support PKCE S256")
    for field in ("authorization_endpoint", "token_endpoint", "revocation_endpoint", "userinfo_endpoint"):
        value = metadata.get(field)
        if not isinstance(value, str) or not value:
            if field in {"authorization_endpoint", "token_endpoint"}:
                raise ProviderError("invalid_response", f"the metadata has no {field}")
            if field == "revocation_endpoint":
                provider.revocation_endpoint = ""  # never send tokens where the issuer no longer says to
            continue  # userinfo_endpoint: an account endpoint may be configured by hand
        try:
            validate_endpoint_url(value)
        except ValidationError:
            raise ProviderError("invalid_response", f"{field} is not an https URL") from None
        setattr(provider, field, value[:500])
    provider.iss_parameter_supported = metadata.get("authorization_response_iss_parameter_supported") is True
    if save:
        provider.save()
    return metadata
