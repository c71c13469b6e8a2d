"""The SSRF-safe fetcher of client ID metadata documents (DOT's ``CIMD_METADATA_FETCHER``).

draft-ietf-oauth-client-id-metadata-document-00 §6.5 (SSRF) and §6.6 (size), MCP
2025-11-25 "Client ID Metadata Document Security". One fetch is:

1. the client_id URL is validated (:func:`~mcp_oauth.authorization_server.cimd.metadata_document.validate_client_id_url`);
2. its host is resolved **once** (:data:`resolve_host`, bounded by the deadline);
3. **every** answer is vetted (:func:`~mcp_oauth.authorization_server.cimd.addresses.vet_address`): requests-hardened's IP filter
   (private, loopback, link-local, CGNAT, multicast, IPv4-mapped decoded, NAT64,
   6to4, …) and then the standard library's ``is_global`` / ``is_reserved`` /
   ``is_site_local`` as a second opinion; one bad answer refuses the whole host;
4. the TCP connection goes to a vetted address itself (no second lookup), while TLS
   SNI, certificate verification and the ``Host`` header use the host name;
5. no redirect is followed, no proxy is used (``HTTPS_PROXY`` & co. are ignored: the
   request never goes through ``requests`` or ``urllib.request``), the body is read
   as a stream and refused past ``CIMD_MAX_DOCUMENT_SIZE`` bytes, and a watchdog
   closes the socket when ``CIMD_FETCH_TIMEOUT_SECONDS`` (the total time limit,
   DNS included) runs out, whatever phase the exchange is in.

The fetcher keeps no state; caching, single-flight and retries are
:mod:`mcp_oauth.authorization_server.cimd.cache`'s.
"""

from __future__ import annotations

import concurrent.futures
import email.utils
import http.client
import logging
import os
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from oauth2_provider.settings import oauth2_settings

from mcp_oauth.authorization_server.cimd.addresses import vet_address
from mcp_oauth.authorization_server.cimd.errors import FetchFailed, InvalidDocument
from mcp_oauth.authorization_server.cimd.metadata_document import validate_client_id_url
from mcp_oauth.observability.tracing import cimd_fetch_attributes, traced
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import strict_json

log = logging.getLogger("mcp_oauth.cimd")

USER_AGENT = "django-mcp-authz CIMD fetcher"
_DIRECTIVE_RE = re.compile(r'\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^,]*))?\s*(?:,|$)')
_CHUNK = 1024


def system_resolver(host: str, port: int) -> list[str]:
    """All addresses ``host`` resolves to (IPv4 and IPv6), in the resolver's order, without duplicates.

    :raises socket.gaierror: the name does not resolve.
    """
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


#: The DNS lookup of the fetcher: ``(host, port) -> [address, …]``. Tests replace it
#: (monkeypatch) to make names resolve to chosen addresses without real DNS.
resolve_host: Callable[[str, int], list[str]] = system_resolver

_dns_pool: concurrent.futures.ThreadPoolExecutor | None = None
_dns_pool_pid = 0
_dns_pool_lock = threading.Lock()


def _dns_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The lookup threads of this process (a forked child, e.g. a prefork worker, gets its own)."""
    global _dns_pool, _dns_pool_pid
    with _dns_pool_lock:
        if _dns_pool is None or _dns_pool_pid != os.getpid():
            _dns_pool = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="cimd-dns")
            _dns_pool_pid = os.getpid()
        return _dns_pool


@dataclass(frozen=True)
class FetchResult:
    """What one fetch returned.

    * ``status``: 200 (``document`` is the decoded JSON value) or 304 (not modified:
      ``document`` is ``None``; only after a conditional request).
    * ``max_age``: freshness lifetime in seconds, from the cache headers, clamped to
      ``CIMD_METADATA_MIN_AGE_SECONDS`` .. ``CIMD_METADATA_MAX_AGE_SECONDS``.
    * ``etag`` / ``last_modified``: the response's validators ("" when absent).
    * ``address``: the vetted IP address the connection went to.
    """

    status: int
    document: Any
    max_age: int
    etag: str = ""
    last_modified: str = ""
    address: str = ""


def _directives(cache_control: str) -> dict[str, str | None]:
    directives: dict[str, str | None] = {}
    for match in _DIRECTIVE_RE.finditer(cache_control or ""):
        name, value = match.group(1).lower(), match.group(2)
        if value is not None:
            value = value.strip().strip('"')
        directives.setdefault(name, value)
    return directives


def _seconds(value: str | None) -> int | None:
    if value is None or not (value.isascii() and value.isdigit()):
        return None
    return int(value) if len(value) <= 12 else 10**12  # past int()'s digit limit: "forever", capped by the caller


def freshness_lifetime(headers: http.client.HTTPMessage | dict, now: datetime | None = None) -> int:
    """Freshness lifetime of a response in seconds (RFC 9111 §4.2.1), clamped to the configured bounds.

    ``no-store`` / ``no-cache``: the lower bound (the document is still needed to
    serve the request, and is revalidated as soon as allowed). Else ``s-maxage``
    (this server is a shared cache), ``max-age``, ``Expires`` − ``Date``; with none of
    them ``MCP_OAUTH["CIMD_DEFAULT_MAX_AGE_SECONDS"]``. An ``Age`` header is
    subtracted (§4.2.3). The result is clamped to
    ``[CIMD_METADATA_MIN_AGE_SECONDS, CIMD_METADATA_MAX_AGE_SECONDS]``.
    """
    floor = int(oauth2_settings.CIMD_METADATA_MIN_AGE_SECONDS)
    ceiling = int(oauth2_settings.CIMD_METADATA_MAX_AGE_SECONDS)
    directives = _directives(headers.get("Cache-Control", "") or "")
    lifetime: int | None
    if "no-store" in directives or "no-cache" in directives:
        lifetime = floor
    else:
        lifetime = _seconds(directives.get("s-maxage"))
        if lifetime is None:
            lifetime = _seconds(directives.get("max-age"))
        if lifetime is None and headers.get("Expires"):
            expires = _http_date(headers.get("Expires"))
            date = _http_date(headers.get("Date")) or now or datetime.now(UTC)
            lifetime = max(0, int((expires - date).total_seconds())) if expires else 0
        if lifetime is None:
            lifetime = int(mcp_oauth_settings.CIMD_DEFAULT_MAX_AGE_SECONDS)
        age = _seconds((headers.get("Age") or "").strip())
        if age:
            lifetime -= age
    return max(floor, min(lifetime, ceiling))


def _http_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


def _ssl_context() -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=mcp_oauth_settings.CIMD_CA_FILE or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


class _Watchdog:
    """Shuts the connection's socket down when the deadline passes, whatever it is blocked on."""

    def __init__(self, deadline: float) -> None:
        self.sock: socket.socket | None = None
        self.fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        sock = self.sock
        if sock is not None:
            try:
                # socket.socket's own shutdown: works on an SSLSocket's descriptor
                # without touching its SSL object, which the reading thread owns.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self._timer.cancel()


class SafeMetadataFetcher:
    """SSRF-safe fetcher of CIMD documents (see the module docstring for the steps).

    Plugged in as ``OAUTH2_PROVIDER["CIMD_METADATA_FETCHER"]``. :meth:`fetch` keeps
    DOT's interface; :meth:`fetch_document` adds conditional requests and returns
    the HTTP cache facts that :mod:`mcp_oauth.authorization_server.cimd.cache` stores.
    """

    def fetch(self, client_id: str) -> tuple[dict, int]:
        """DOT's fetcher interface: ``(document, max_age_seconds)``.

        :raises CIMDRefused: (a ``CIMDError``) on any failure.
        """
        result = self.fetch_document(client_id)
        if not isinstance(result.document, dict):
            raise InvalidDocument("The metadata document must be a JSON object.", reason="not_object")
        return result.document, result.max_age

    @traced("cimd.fetch", cimd_fetch_attributes)  # a CLIENT span when tracing is on
    def fetch_document(
        self, client_id: str, *, etag: str = "", last_modified: str = "", max_size: int | None = None
    ) -> FetchResult:
        """GET the document at ``client_id``; conditional when ``etag`` / ``last_modified`` are given.

        :param max_size: the largest body accepted (bytes); None: ``CIMD_MAX_DOCUMENT_SIZE``
            (a key set passes ``JWKS_MAX_SIZE``).

        :returns: a :class:`FetchResult` (200 with the decoded JSON value, or 304).
        :raises InvalidClientIdURL: the URL breaks draft §3 (nothing was fetched).
        :raises AddressRefused: the host is or resolves to a non-public address (SSRF).
        :raises FetchFailed: DNS failure, connection/TLS failure, a status other than
            200 (or 304 to a conditional request), a redirect, a non-JSON media type, a
            ``Content-Encoding``, a body over ``max_size`` bytes, or the
            total time limit ``CIMD_FETCH_TIMEOUT_SECONDS`` exceeded.
        :raises InvalidDocument: the body is not UTF-8 JSON (duplicate member names,
            ``NaN`` and nesting beyond the recursion limit included).
        """
        parts = validate_client_id_url(client_id)
        host = parts.hostname or ""
        port = parts.port or 443
        timeout = float(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS)
        deadline = time.monotonic() + timeout
        allow_loopback = bool(mcp_oauth_settings.CIMD_ALLOW_LOOPBACK_FOR_TESTS)

        addresses = self._resolve(host, port, deadline)
        vetted = [vet_address(address, allow_loopback=allow_loopback) for address in addresses]

        path = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = {
            "Host": parts.netloc,
            "Accept": "application/json, application/*+json;q=0.9",
            "Accept-Encoding": "identity",
            "User-Agent": USER_AGENT,
        }
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        conditional = bool(etag or last_modified)
        limit = int(oauth2_settings.CIMD_MAX_DOCUMENT_SIZE if max_size is None else max_size)

        last_error: BaseException | None = None
        for address in vetted:
            if time.monotonic() >= deadline:
                break
            try:
                return self._exchange(address, port, host, path, headers, deadline, conditional, limit)
            except _ConnectFailed as exc:
                last_error = exc.__cause__ or exc
                continue
        if time.monotonic() >= deadline:
            raise FetchFailed("Fetching the metadata document took too long.", reason="timeout")
        raise FetchFailed(
            "The metadata document's host could not be reached.",
            reason="connect",
            detail={"error": type(last_error).__name__ if last_error else ""},
        )

    # --- steps -------------------------------------------------------------------

    def _resolve(self, host: str, port: int, deadline: float) -> list[str]:
        lookup = resolve_host
        future = _dns_executor().submit(lookup, host, port)
        try:
            addresses = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            raise FetchFailed("Resolving the client_id host took too long.", reason="dns_timeout") from None
        except (OSError, UnicodeError, ValueError):
            raise FetchFailed("The client_id host name does not resolve.", reason="dns") from None
        if not addresses:
            raise FetchFailed("The client_id host name does not resolve.", reason="dns")
        return list(addresses)

    def _exchange(
        self,
        address: str,
        port: int,
        host: str,
        path: str,
        headers: dict[str, str],
        deadline: float,
        conditional: bool,
        max_size: int,
    ) -> FetchResult:
        watchdog = _Watchdog(deadline)
        raw: socket.socket | None = None
        tls: ssl.SSLSocket | None = None
        try:
            try:
                # A numeric address: create_connection does no DNS lookup.
                raw = socket.create_connection((address, port), timeout=max(0.01, deadline - time.monotonic()))
            except OSError as exc:
                raise _ConnectFailed() from exc
            watchdog.sock = raw
            try:
                # Handshake after wrapping, so that the watchdog holds the TLS socket
                # (wrap_socket detaches ``raw``) and can cut a dripping handshake too.
                tls = _ssl_context().wrap_socket(raw, server_hostname=host.rstrip("."), do_handshake_on_connect=False)
                watchdog.sock = tls
                tls.settimeout(max(0.01, deadline - time.monotonic()))
                tls.do_handshake()
            except ssl.SSLCertVerificationError:
                raise FetchFailed(
                    "The metadata document's host presented a certificate that could not be verified.", reason="tls"
                ) from None
            except (OSError, ssl.SSLError):
                self._check_deadline(deadline, watchdog)
                raise FetchFailed("The TLS handshake with the metadata document's host failed.", reason="tls") from None
            connection = http.client.HTTPSConnection(host, port)
            connection.sock = tls
            try:
                connection.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
                for name, value in headers.items():
                    connection.putheader(name, value)
                connection.endheaders()
                tls.settimeout(max(0.01, deadline - time.monotonic()))
                response = connection.getresponse()
                return self._read(response, tls, deadline, watchdog, conditional, address, max_size)
            except (OSError, http.client.HTTPException):
                self._check_deadline(deadline, watchdog)
                raise FetchFailed("The metadata document's host sent no valid HTTP response.", reason="http") from None
        finally:
            watchdog.cancel()
            for sock in (tls, raw):
                if sock is not None:
                    try:
                        sock.close()
                    except OSError:
                        pass

    @staticmethod
    def _check_deadline(deadline: float, watchdog: _Watchdog) -> None:
        if watchdog.fired or time.monotonic() >= deadline:
            raise FetchFailed("Fetching the metadata document took too long.", reason="timeout")

    def _read(
        self,
        response: http.client.HTTPResponse,
        tls: ssl.SSLSocket,
        deadline: float,
        watchdog: _Watchdog,
        conditional: bool,
        address: str,
        max_size: int,
    ) -> FetchResult:
        status = response.status
        etag = (response.headers.get("ETag") or "")[:255]
        last_modified = (response.headers.get("Last-Modified") or "")[:64]
        if status == 304 and conditional:
            return FetchResult(304, None, freshness_lifetime(response.headers), etag, last_modified, address)
        if 300 <= status < 400:
            raise FetchFailed(
                f"The metadata document URL answered with a redirect (HTTP {status}); redirects are not followed.",
                reason="redirect",
                detail={"status": status},
            )
        if status != 200:
            raise FetchFailed(
                f"The metadata document could not be fetched (HTTP {status}).",
                reason="http_status",
                detail={"status": status},
            )
        content_type = response.headers.get("Content-Type", "")
        media_type, _, params = content_type.partition(";")
        media_type = media_type.strip().lower()
        if media_type != "application/json" and not (
            media_type.startswith("application/") and media_type.endswith("+json")
        ):
            raise FetchFailed(
                "The metadata document is not served as JSON (Content-Type must be application/json).",
                reason="content_type",
                detail={"content_type": media_type[:100]},
            )
        charset = re.search(r"charset\s*=\s*\"?([^\";\s]+)", params, re.IGNORECASE)
        if charset and charset.group(1).lower() not in ("utf-8", "utf8"):
            raise FetchFailed("The metadata document must be UTF-8 JSON.", reason="charset")
        encoding = (response.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding != "identity":
            raise FetchFailed("The metadata document must be sent without Content-Encoding.", reason="content_encoding")
        too_large = FetchFailed(
            f"The metadata document is larger than {max_size} bytes.", reason="too_large", detail={"limit": max_size}
        )
        length = response.headers.get("Content-Length")
        declared = (length or "").strip()
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > max_size):
            raise too_large
        body = bytearray()
        # Python >= 3.13 closes the response (and so the socket) as soon as read1() reaches
        # Content-Length; earlier versions return b"" first. Either way the body is complete.
        while not response.isclosed():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or watchdog.fired:
                raise FetchFailed("Fetching the metadata document took too long.", reason="timeout")
            tls.settimeout(remaining)
            chunk = response.read1(_CHUNK)
            if watchdog.fired:
                raise FetchFailed("Fetching the metadata document took too long.", reason="timeout")
            if not chunk:
                break
            body += chunk
            if len(body) > max_size:
                raise too_large
        return FetchResult(
            200, _decode_json(bytes(body)), freshness_lifetime(response.headers), etag, last_modified, address
        )


class _ConnectFailed(Exception):
    """The TCP connection to one vetted address failed (the next one may be tried)."""


def _decode_json(body: bytes) -> Any:
    """Strict UTF-8 JSON (RFC 8259 §8.1; :func:`mcp_oauth.shared.strict_json.loads`): no BOM, no
    duplicate member names, no NaN/Infinity, no number overflowing to infinity."""
    try:
        return strict_json.loads(body)
    except strict_json.StrictJSONError:
        raise InvalidDocument("The metadata document is not valid UTF-8 JSON.", reason="json") from None
