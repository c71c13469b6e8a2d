"""Validation of CIMD client_id URLs and of the documents fetched from them.

Rules from draft-ietf-oauth-client-id-metadata-document-00 (§3 the URL, §4.1 the
document, §6 security) and the MCP authorization spec 2025-11-25 ("Client ID
Metadata Documents": the URL is https with a path; the document has ``client_id``,
``client_name`` and ``redirect_uris``; its ``client_id`` equals the URL exactly).
Both functions are pure: no I/O, no database.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from oauth2_provider.models import check_redirect_to_uri_allowed

from mcp_oauth.authorization_server.cimd.addresses import vet_address
from mcp_oauth.authorization_server.cimd.errors import AddressRefused, InvalidClientIdURL, InvalidDocument
from mcp_oauth.shared.redirect_uris import redirect_uri_registered
from mcp_oauth.shared.text import has_invisible_format_characters, storable

log = logging.getLogger("mcp_oauth.cimd")

#: Longest client_id URL accepted (DOT's ``Application.client_id`` holds 255 characters).
MAX_CLIENT_ID_LENGTH = 255
#: Most redirect URIs a document may list, and the longest one.
MAX_REDIRECT_URIS = 20
MAX_REDIRECT_URI_LENGTH = 2000
#: Longest ``client_name`` (DOT's ``Application.name`` holds 255 characters).
MAX_CLIENT_NAME_LENGTH = 255

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOSTNAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")

#: Members that must never appear in a CIMD document, whatever their value (draft §4.1).
FORBIDDEN_MEMBERS = ("client_secret", "client_secret_expires_at")
#: Client authentication methods based on a shared secret (draft §4.1 forbids them).
SHARED_SECRET_AUTH_METHODS = frozenset({"client_secret_basic", "client_secret_post", "client_secret_jwt"})
#: Members of a JWK that only a private or symmetric key has (RFC 7518 §6.2.2, §6.3.2, §6.4.1).
PRIVATE_JWK_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
#: The client authentication methods a CIMD client may use on this server (RFC 7591 §2 names).
CIMD_AUTH_METHODS = ("none", "private_key_jwt")
#: The document member listing the methods its client supports (OpenID Connect RP Metadata Choices 1.0, MCP SEP-3149).
AUTH_METHODS_MEMBER = "token_endpoint_auth_methods_supported"
#: Most entries that list may have, and the longest entry (the IANA registry's names are under 40 characters).
MAX_AUTH_METHODS = 16
MAX_AUTH_METHOD_LENGTH = 128
SUPPORTED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
LOOPBACK_REDIRECT_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def _is_ip_literal(host: str) -> bool:
    """True for an IPv6 literal or anything ``inet_aton`` reads as IPv4 (``2130706433``, ``0x7f.1``, ``0177.0.0.1``, ``127.1``)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.inet_aton(host)
        return True
    except (OSError, ValueError):
        return False


def validate_client_id_url(client_id: Any) -> SplitResult:
    """Check that ``client_id`` is an acceptable CIMD client identifier URL.

    Draft §3: scheme ``https``, a host, a path, no single- or double-dot path
    segment, no fragment, no username or password; a query is allowed (and logged).
    This server adds: lowercase ``https://``, at most :data:`MAX_CLIENT_ID_LENGTH`
    printable ASCII characters (no whitespace, control characters or backslash, no
    percent-encoded dot segment or control character), a non-root path, a DNS host
    name rather than an IP address.

    :returns: the ``urlsplit`` parts of the URL.
    :raises InvalidClientIdURL: ``invalid_request``; the message names the broken rule.
    :raises AddressRefused: the host is an IP literal that is not globally routable
        (loopback, private, … in any spelling: ``127.1``, ``0x7f000001``, ``[::1]``).
    """
    if not isinstance(client_id, str) or not client_id:
        raise InvalidClientIdURL("The client_id must be an https URL.")
    if len(client_id) > MAX_CLIENT_ID_LENGTH:
        raise InvalidClientIdURL(f"The client_id URL is longer than {MAX_CLIENT_ID_LENGTH} characters.")
    if any(not (0x21 <= ord(ch) <= 0x7E) for ch in client_id) or "\\" in client_id:
        raise InvalidClientIdURL(
            "The client_id URL must be printable ASCII without spaces, control characters or backslashes."
        )
    if not client_id.startswith("https://"):
        raise InvalidClientIdURL('The client_id URL must use the "https" scheme, in lowercase.')
    if "#" in client_id:
        raise InvalidClientIdURL("The client_id URL must not contain a fragment.")
    try:
        parts = urlsplit(client_id)
        port = parts.port
    except ValueError:
        raise InvalidClientIdURL("The client_id URL is malformed (host or port).") from None
    if "@" in parts.netloc:
        raise InvalidClientIdURL("The client_id URL must not contain a user name or password.")
    if port == 0:
        raise InvalidClientIdURL("The client_id URL has an invalid port.")
    host = parts.hostname or ""
    if not host:
        raise InvalidClientIdURL("The client_id URL must contain a host.")
    if parts.path in ("", "/"):
        raise InvalidClientIdURL("The client_id URL must contain a path, e.g. https://client.example/metadata.json.")
    for segment in parts.path.split("/"):
        decoded = unquote(segment)
        if decoded in (".", "..") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in decoded) or "/" in decoded:
            raise InvalidClientIdURL(
                "The client_id URL path must not contain dot segments or encoded slashes or control characters."
            )
    if _is_ip_literal(host):
        try:
            vet_address(socket.inet_ntoa(socket.inet_aton(host)) if ":" not in host else host)
        except (AddressRefused, OSError, ValueError):
            raise AddressRefused(
                "The client_id URL names a local, private or reserved address.",
                reason="ip_literal",
                detail={"host": host},
            ) from None
        raise InvalidClientIdURL("The client_id URL must name its host, not an IP address.")
    if not _HOSTNAME_RE.match(host) or len(host) > 253:
        raise InvalidClientIdURL("The client_id URL host is not a valid DNS name.")
    if parts.query:
        log.info("CIMD client_id %r carries a query string (allowed, discouraged by draft §3)", client_id)
    return parts


def _check_redirect_uri(uri: Any) -> str:
    """One ``redirect_uris`` entry: https, or http on a loopback host (OAuth 2.1 §2.3.1, RFC 8252 §7.3, RFC 9700 §2.6)."""
    if not isinstance(uri, str) or not uri:
        raise InvalidDocument("Every redirect_uris entry must be a non-empty string.", reason="redirect_uri")
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        raise InvalidDocument("A redirect URI in the metadata document is too long.", reason="redirect_uri")
    if any(not (0x21 <= ord(ch) <= 0x7E) for ch in uri) or "\\" in uri:
        raise InvalidDocument(
            "Redirect URIs must be printable ASCII without spaces or control characters.", reason="redirect_uri"
        )
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise InvalidDocument("A redirect URI in the metadata document is malformed.", reason="redirect_uri") from None
    host = (parts.hostname or "").lower()
    if parts.fragment or "#" in uri:
        raise InvalidDocument("Redirect URIs must not contain a fragment.", reason="redirect_uri")
    if "@" in parts.netloc:
        raise InvalidDocument("Redirect URIs must not contain a user name or password.", reason="redirect_uri")
    if not host:
        raise InvalidDocument("Redirect URIs must be absolute URLs with a host.", reason="redirect_uri")
    if parts.scheme == "https" and uri.startswith("https://"):
        return uri
    if parts.scheme == "http" and uri.startswith("http://") and host in LOOPBACK_REDIRECT_HOSTS:
        return uri
    raise InvalidDocument(
        "Redirect URIs must use https, or http on a loopback address (127.0.0.1, [::1], localhost).",
        reason="redirect_uri",
    )


def validate_document(document: Any, client_id: str) -> dict[str, Any]:
    """Check a fetched document against the CIMD rules; return it unchanged when it passes.

    * a JSON object whose every string is storable text (no NUL, valid UTF-8);
    * ``client_id`` equals ``client_id`` exactly (draft §4.1: simple string comparison;
      a trailing slash, ``:443`` or a case difference is a mismatch);
    * ``client_name`` a non-empty string of at most 255 characters; one holding bidirectional or
      zero-width formatting characters is replaced by the ``client_id`` URL's host;
    * ``redirect_uris`` a non-empty array (at most 20) of https or loopback-http URIs;
    * no ``client_secret`` nor ``client_secret_expires_at`` member, whatever its value;
    * the client authentication method negotiated by :func:`negotiate_auth_method` from
      ``token_endpoint_auth_methods_supported`` (SEP-3149) or ``token_endpoint_auth_method``:
      ``"none"``, or ``"private_key_jwt"`` with ``jwks`` or an https ``jwks_uri`` (RFC 7523 §2.2;
      shared-secret methods are forbidden by draft §4.1); the accepted document's
      ``token_endpoint_auth_method`` is the negotiated one;
    * ``jwks``, if present, has no private or symmetric key material;
    * ``grant_types`` including ``authorization_code`` and ``response_types`` including ``code``;
      unsupported values and unusable optional members are left out, not refused (RFC 7591 §2,
      :func:`accepted_document`): vendors' documents list the device grant, odd logo URLs, ….

    Refused are only what is unsafe or contradictory: a redirect URI this server would never
    redirect to, shared-secret (or unsupported) authentication, secrets, private keys, a
    ``client_id`` that is not the URL.

    :param document: the decoded JSON value.
    :param client_id: the URL it was fetched from.
    :returns: the accepted document (a copy, without the unsupported members and values).
    :raises InvalidDocument: with a message naming the broken rule.
    """
    if not isinstance(document, dict):
        raise InvalidDocument("The metadata document must be a JSON object.", reason="not_object")
    if not storable(document):
        raise InvalidDocument("The metadata document contains NUL characters or invalid text.", reason="text")
    for name in ("client_id", "client_name", "redirect_uris"):
        if name not in document:
            raise InvalidDocument(
                f"The metadata document has no {name}.", reason="missing_member", detail={"member": name}
            )
    if document["client_id"] != client_id:
        raise InvalidDocument(
            "The metadata document's client_id does not match the URL it was fetched from.", reason="client_id_mismatch"
        )
    for name in FORBIDDEN_MEMBERS:
        if name in document:
            raise InvalidDocument(
                f"The metadata document must not contain {name}.", reason="forbidden_member", detail={"member": name}
            )
    name = document["client_name"]
    if not isinstance(name, str) or not name.strip():
        raise InvalidDocument("client_name must be a non-empty string.", reason="client_name")
    if len(name) > MAX_CLIENT_NAME_LENGTH or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        raise InvalidDocument("client_name is too long or contains control characters.", reason="client_name")
    if has_invisible_format_characters(name):
        # A name that could read as another one (bidi override, zero-width characters): dropped,
        # the client is shown under its client_id URL's host instead.
        document = {**document, "client_name": urlsplit(client_id).hostname or client_id}
    uris = document["redirect_uris"]
    if not isinstance(uris, list) or not uris:
        raise InvalidDocument("redirect_uris must be a non-empty array.", reason="redirect_uri")
    if len(uris) > MAX_REDIRECT_URIS:
        raise InvalidDocument(f"redirect_uris may list at most {MAX_REDIRECT_URIS} URIs.", reason="redirect_uri")
    for uri in uris:
        _check_redirect_uri(uri)
    method = negotiate_auth_method(document)
    jwks = document.get("jwks")
    if jwks is not None:
        keys = jwks.get("keys") if isinstance(jwks, dict) else None
        if not isinstance(keys, list) or not all(isinstance(key, dict) for key in keys):
            raise InvalidDocument("jwks must be a JSON Web Key Set.", reason="jwks")
        if any(PRIVATE_JWK_MEMBERS & set(key) for key in keys):
            raise InvalidDocument("jwks must not contain private or symmetric key material.", reason="jwks")
    accepted = accepted_document(document)
    accepted["token_endpoint_auth_method"] = method
    if AUTH_METHODS_MEMBER in document:
        accepted[AUTH_METHODS_MEMBER] = list(dict.fromkeys(document[AUTH_METHODS_MEMBER]))
    return accepted


def negotiate_auth_method(document: dict[str, Any]) -> str:
    """The client authentication method this server will expect of the document's client.

    OpenID Connect RP Metadata Choices 1.0 §2 and MCP SEP-3149: a client ID metadata document,
    published once for every authorization server, lists the methods its client can use in
    ``token_endpoint_auth_methods_supported`` (most preferred first); the server picks the first one
    it supports and the client is eligible for:

    * ``none`` (a public client, PKCE only): always eligible;
    * ``private_key_jwt`` (RFC 7523 §2.2): only with ``jwks`` or an https ``jwks_uri``;
    * other registered or extension methods (``tls_client_auth``, …): skipped.

    When the list is present it decides, and the singular ``token_endpoint_auth_method`` (kept by
    the SEP for servers that only read it) is ignored even when it names another method (RP
    Metadata Choices: a server that reads the multi-valued parameter uses it). Without the list,
    the singular is honoured as before, absent meaning ``none``.

    Shared-secret methods (``client_secret_basic``, ``client_secret_post``, ``client_secret_jwt``)
    are refused in either member: a CIMD client has no secret (draft §4.1).

    :returns: ``"none"`` or ``"private_key_jwt"``.
    :raises InvalidDocument: reason ``auth_method``: the list is not a non-empty array of at most
        :data:`MAX_AUTH_METHODS` non-empty strings (duplicates count, and are then ignored) of at most
        :data:`MAX_AUTH_METHOD_LENGTH` characters, names a shared-secret method, or offers nothing usable here; the singular
        (without the list) is a shared-secret or unsupported method, or ``private_key_jwt`` without keys.
    """
    singular = document.get("token_endpoint_auth_method", "none")
    if isinstance(singular, str) and singular in SHARED_SECRET_AUTH_METHODS:
        raise _shared_secret(singular, "token_endpoint_auth_method")
    if AUTH_METHODS_MEMBER not in document:
        if singular == "private_key_jwt" and not _has_client_keys(document):
            raise InvalidDocument(
                "token_endpoint_auth_method private_key_jwt needs jwks or an https jwks_uri.",
                reason="auth_method",
                detail={"method": "private_key_jwt"},
            )
        if singular not in CIMD_AUTH_METHODS:
            raise InvalidDocument(
                'This server accepts CIMD clients with token_endpoint_auth_method "none" or "private_key_jwt".',
                reason="auth_method",
                detail={"method": str(singular)[:64]},
            )
        return singular
    methods = document[AUTH_METHODS_MEMBER]
    if not isinstance(methods, list) or not methods:
        raise InvalidDocument(f"{AUTH_METHODS_MEMBER} must be a non-empty array of strings.", reason="auth_method")
    if len(methods) > MAX_AUTH_METHODS:
        raise InvalidDocument(
            f"{AUTH_METHODS_MEMBER} may list at most {MAX_AUTH_METHODS} methods.", reason="auth_method"
        )
    if not all(isinstance(m, str) and 0 < len(m) <= MAX_AUTH_METHOD_LENGTH for m in methods):
        raise InvalidDocument(
            f"Every {AUTH_METHODS_MEMBER} entry must be a non-empty string of at most {MAX_AUTH_METHOD_LENGTH} characters.",
            reason="auth_method",
        )
    for listed in methods:
        if listed in SHARED_SECRET_AUTH_METHODS:
            raise _shared_secret(listed, AUTH_METHODS_MEMBER)
    if "token_endpoint_auth_method" in document and document["token_endpoint_auth_method"] not in methods:
        log.info(
            "CIMD document %r: token_endpoint_auth_method %r is not in %s; the list decides",
            document.get("client_id"),
            str(document["token_endpoint_auth_method"])[:64],
            AUTH_METHODS_MEMBER,
        )
    for listed in dict.fromkeys(methods):
        if listed == "none" or (listed == "private_key_jwt" and _has_client_keys(document)):
            return listed
    raise InvalidDocument(
        f"None of the {AUTH_METHODS_MEMBER} is usable here: this server accepts CIMD clients with "
        '"none", or "private_key_jwt" with jwks or an https jwks_uri.',
        reason="auth_method",
        detail={"methods": [m[:64] for m in list(dict.fromkeys(methods))[:8]]},
    )


def _has_client_keys(document: dict[str, Any]) -> bool:
    """Whether the document registers keys for ``private_key_jwt``: ``jwks`` holding a key (an object
    with a ``kty``, RFC 7517 §4.1; an empty set publishes none) or an https ``jwks_uri``."""
    jwks = document.get("jwks")
    keys = jwks.get("keys") if isinstance(jwks, dict) else None
    if isinstance(keys, list) and any(isinstance(key, dict) and isinstance(key.get("kty"), str) for key in keys):
        return True
    return _https_url(document.get("jwks_uri"))


def _shared_secret(method: str, member: str) -> InvalidDocument:
    return InvalidDocument(
        f"{member} {method} relies on a shared secret, which CIMD clients must not use.",
        reason="auth_method",
        detail={"method": method},
    )


#: Optional members that are URLs shown to users or fetched: kept only when they are https URLs.
URL_MEMBERS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
#: Optional members kept only when they are strings.
STRING_MEMBERS = ("scope", "software_id", "software_version")


def accepted_document(document: dict[str, Any]) -> dict[str, Any]:
    """RFC 7591 §2 leniency: the document with the members and values this server does not support left out.

    * ``grant_types``: values other than ``authorization_code`` and ``refresh_token`` (the
      device grant, ``client_credentials``, vendor grants) are dropped; what remains must
      include ``authorization_code`` — a document that does not ask for it contradicts the
      only way a CIMD client is used;
    * ``response_types``: values other than ``code`` are dropped; ``code`` must be listed;
    * ``client_uri``, ``logo_uri``, ``tos_uri``, ``policy_uri``, ``jwks_uri``: dropped unless an
      https URL (an unusable logo never blocks a client); ``scope``, ``software_id``,
      ``software_version``: dropped unless strings;
    * ``application_type``: kept when ``native`` or ``web``, else dropped.

    :raises InvalidDocument: ``grant_types`` / ``response_types`` without the values a CIMD client needs.
    """
    accepted = dict(document)
    grant_types = document.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list):
        grant_types = []
    kept = [g for g in dict.fromkeys(grant_types) if isinstance(g, str) and g in SUPPORTED_GRANT_TYPES]
    if "authorization_code" not in kept:
        raise InvalidDocument("grant_types must include authorization_code.", reason="grant_types")
    accepted["grant_types"] = kept
    response_types = document.get("response_types", ["code"])
    if not isinstance(response_types, list) or "code" not in response_types:
        raise InvalidDocument('response_types must include "code".', reason="response_types")
    accepted["response_types"] = ["code"]
    for member in URL_MEMBERS:
        if member in accepted and not _https_url(accepted[member]):
            log.info("CIMD document %r: ignoring unusable %s", document.get("client_id"), member)
            del accepted[member]
    for member in STRING_MEMBERS:
        if member in accepted and not isinstance(accepted[member], str):
            del accepted[member]
    if "application_type" in accepted and accepted["application_type"] not in ("native", "web"):
        del accepted["application_type"]
    return accepted


def _https_url(value: Any) -> bool:
    """An absolute https URL of printable ASCII with a host and no userinfo (2000 characters at most)."""
    if not isinstance(value, str) or not value.startswith("https://") or len(value) > 2000:
        return False
    if any(not (0x21 <= ord(ch) <= 0x7E) for ch in value):
        return False
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        return False
    return bool(parts.hostname) and "@" not in parts.netloc


def redirect_uri_allowed(redirect_uri: str, document: dict[str, Any]) -> bool:
    """Whether ``redirect_uri`` is one of the document's ``redirect_uris``.

    Exact string match, except a loopback redirect URI matches on any port
    (RFC 8252 §7.3): DOT's rule and the profile's (:mod:`mcp_oauth.shared.redirect_uris`) must both agree.
    MCP 2025-11-25 "Client ID Metadata Documents": the AS MUST validate the
    authorization request's redirect URI against the metadata document.
    """
    uris = document.get("redirect_uris") if isinstance(document, dict) else None
    if not isinstance(redirect_uri, str) or not isinstance(uris, list):
        return False
    registered = [uri for uri in uris if isinstance(uri, str)]
    allowed, _ = check_redirect_to_uri_allowed(redirect_uri, registered)
    return allowed and redirect_uri_registered(redirect_uri, registered)
