"""Test helpers for CIMD: a test CA, a local HTTPS document server, a canary listener, fake DNS, an egress guard.

Everything listens on and connects to 127.0.0.1 only. The CA and the server
certificate are generated at test time with ``cryptography`` (EC P-256, valid for
one day) into a temporary directory; no key is ever written to the repository.

* :class:`TestPKI` — ``ca_file`` (PEM) and a server certificate for given DNS names.
* :class:`DocumentServer` — ``https://<name>:<port>/<path>`` serving :class:`Route`s
  (status, headers, body, delay, slow drip, ETag / 304), recording every request.
* :class:`Canary` — a plain TCP listener that only counts connections: where a test
  must prove that nothing was reached.
* fixtures: ``cimd_dns`` (the fetcher's resolver replaced by a dict, no real DNS),
  ``egress_guard`` (any ``connect`` to anything but 127.0.0.1 fails and is
  recorded), ``cimd_env`` (all of it wired into the settings).
"""

from __future__ import annotations

import datetime
import http.server
import ipaddress
import json
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

LOOPBACK = "127.0.0.1"
TEST_HOSTS = ("client.cimd.test", "attacker.cimd.test", "other.cimd.test", "localhost")


class TestPKI:
    """A throw-away CA and one server certificate signed by it (SANs: ``dns_names`` and 127.0.0.1)."""

    __test__ = False  # not a test class

    def __init__(self, directory: Path, dns_names: tuple[str, ...] = TEST_HOSTS) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "django-mcp-authz test CA")])
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.DNSName(name) for name in dns_names] + [x509.IPAddress(ipaddress.ip_address(LOOPBACK))]
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        self.directory = directory
        self.ca_file = directory / "ca.pem"
        self.cert_file = directory / "server.pem"
        self.key_file = directory / "server-key.pem"
        self.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
        self.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        return context


_pki_lock = threading.Lock()
_pki: TestPKI | None = None


def shared_pki() -> TestPKI:
    """One :class:`TestPKI` per test process, in a temporary directory removed at exit."""
    global _pki
    with _pki_lock:
        if _pki is None:
            directory = Path(tempfile.mkdtemp(prefix="mcp-authz-test-pki-"))
            import atexit
            import shutil

            atexit.register(shutil.rmtree, directory, True)
            _pki = TestPKI(directory)
        return _pki


@dataclass
class Route:
    """What the server answers on one path.

    ``body`` (bytes, or a JSON-able value that is encoded with ``content_type``
    application/json); ``delay``: seconds to wait before answering (holds the fetch
    open); ``drip``: seconds between single body bytes (a slow body);
    ``content_length``: False to omit the header; ``etag``: answer 304 to a matching
    ``If-None-Match``.
    """

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = "application/json"
    delay: float = 0.0
    drip: float | None = None
    content_length: bool = True
    etag: str | None = None

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if self.body is None:
            return b""
        return json.dumps(self.body).encode()


@dataclass
class Seen:
    """One request the document server received."""

    path: str
    headers: dict[str, str]
    status: int


class _TLSServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, owner: DocumentServer, context: ssl.SSLContext) -> None:
        self.owner = owner
        self.context = context
        super().__init__((LOOPBACK, 0), _Handler)

    def get_request(self):
        sock, address = super().get_request()
        with self.owner.lock:
            self.owner.connections += 1
        return self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request, client_address) -> None:  # a refused handshake is expected in some tests
        pass


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: _TLSServer

    def setup(self) -> None:
        self.request.settimeout(10)
        self.request.do_handshake()
        super().setup()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        owner = self.server.owner
        path = self.path.split("?", 1)[0]
        route = owner.routes.get(path) or Route(body={"error": "not found"}, status=404)
        status = route.status
        if route.etag and self.headers.get("If-None-Match") == route.etag and status == 200:
            status = 304
        with owner.lock:
            owner.seen.append(Seen(self.path, dict(self.headers.items()), status))
        if route.delay:
            owner.stopping.wait(route.delay)
        body = b"" if status == 304 else route.encoded()
        self.send_response(status)
        if route.content_type and status != 304:
            self.send_header("Content-Type", route.content_type)
        if route.etag:
            self.send_header("ETag", route.etag)
        for name, value in route.headers.items():
            self.send_header(name, value)
        if route.content_length and status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            if route.drip is None:
                self.wfile.write(body)
                return
            for index in range(len(body)):
                if owner.stopping.wait(route.drip):
                    return
                self.wfile.write(body[index : index + 1])
                self.wfile.flush()
        except OSError:
            return


class DocumentServer:
    """HTTPS on 127.0.0.1 with the test CA's certificate; ``url(path, host)`` builds client_id URLs."""

    def __init__(self, pki: TestPKI) -> None:
        self.pki = pki
        self.routes: dict[str, Route] = {}
        self.seen: list[Seen] = []
        self.connections = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _TLSServer(self, pki.server_context())
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    def __enter__(self) -> DocumentServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def url(self, path: str, host: str = "client.cimd.test") -> str:
        return f"https://{host}:{self.port}{path}"

    def serve(self, path: str, route: Route | None = None, **kwargs: Any) -> Route:
        """Serve ``route`` (or ``Route(**kwargs)``) at ``path``; returns it (tests may mutate it later)."""
        route = route or Route(**kwargs)
        self.routes[path] = route
        return route

    def fetches(self, path: str | None = None) -> list[Seen]:
        with self.lock:
            return [seen for seen in self.seen if path is None or seen.path.split("?", 1)[0] == path]


class Canary:
    """A TCP listener on 127.0.0.1 that accepts, counts and closes connections (and never answers)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((LOOPBACK, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.hits = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                if self._stop.is_set():
                    return
                continue
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        except OSError:
            pass
        self._thread.join(timeout=2)
        self.sock.close()


# --- fixtures ------------------------------------------------------------------------------


@dataclass
class FakeDNS:
    """The fetcher's resolver during a test: ``names[host] = [addresses]``; literals parse numerically; anything else fails."""

    names: dict[str, list[str]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)
    sequence: dict[str, list[list[str]]] = field(default_factory=dict)

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        key = host.rstrip(".").lower()
        if key in self.sequence and self.sequence[key]:
            return list(self.sequence[key].pop(0))
        if key in self.names:
            return list(self.names[key])
        try:  # an IP literal in any spelling inet_aton reads (no DNS involved)
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            raise socket.gaierror(socket.EAI_NONAME, "unknown test host") from None
        return [str(info[4][0]) for info in infos]


@pytest.fixture
def cimd_dns(monkeypatch) -> FakeDNS:
    from mcp_oauth.authorization_server.cimd import fetcher

    dns = FakeDNS({name: [LOOPBACK] for name in TEST_HOSTS})
    monkeypatch.setattr(fetcher, "resolve_host", dns)
    return dns


@dataclass
class EgressGuard:
    """Destinations of every outgoing ``connect`` during the test; only 127.0.0.1 is let through."""

    attempts: list[tuple] = field(default_factory=list)

    @property
    def refused(self) -> list[tuple]:
        return [address for address in self.attempts if not (isinstance(address, tuple) and address[0] == LOOPBACK)]


@pytest.fixture
def egress_guard(monkeypatch) -> EgressGuard:
    guard = EgressGuard()
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def check(address) -> None:
        guard.attempts.append(address)
        if isinstance(address, tuple) and address[0] != LOOPBACK:
            raise ConnectionRefusedError(f"test egress guard: {address[0]} is not 127.0.0.1")

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            check(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            check(address)
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return guard


@dataclass
class CIMDEnv:
    """What ``cimd_env`` sets up: the document server, its DNS, the egress guard and the settings it changed."""

    server: DocumentServer
    dns: FakeDNS
    guard: EgressGuard
    pki: TestPKI
    settings: Any

    def url(self, path: str = "/client.json", host: str = "client.cimd.test") -> str:
        return self.server.url(path, host)

    def document(self, client_id: str, **members: Any) -> dict:
        """A valid CIMD document for ``client_id``; ``members`` override or add (``None`` removes)."""
        base = {
            "client_id": client_id,
            "client_name": "Test CIMD client",
            "redirect_uris": ["http://127.0.0.1/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        return with_members(base, **members)

    def publish(
        self, path: str = "/client.json", host: str = "client.cimd.test", max_age: int | None = 3600, **members: Any
    ) -> str:
        """Serve a valid document at ``path`` (``Cache-Control: max-age``); returns its client_id URL."""
        client_id = self.url(path, host)
        headers = {"Cache-Control": f"max-age={max_age}"} if max_age is not None else {}
        self.server.serve(path, body=self.document(client_id, **members), headers=headers)
        return client_id

    def allow_loopback(self, allowed: bool) -> None:
        self.settings.MCP_OAUTH = {**self.settings.MCP_OAUTH, "CIMD_ALLOW_LOOPBACK_FOR_TESTS": allowed}


def cimd_settings(settings, pki: TestPKI, *, allow_loopback: bool = True, **dot: Any) -> None:
    """Point the CIMD settings at the test CA, allow loopback fetches (tests only), turn throttling off."""
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "CIMD_CA_FILE": str(pki.ca_file),
        "CIMD_ALLOW_LOOPBACK_FOR_TESTS": allow_loopback,
        "CIMD_FETCH_WAIT_SECONDS": 15,
        "THROTTLE_RATES": {"register": None, "authorize": None, "token": None},
    }
    settings.OAUTH2_PROVIDER = {
        **getattr(settings, "OAUTH2_PROVIDER", {}),
        "CIMD_FETCH_TIMEOUT_SECONDS": 2,
        "CIMD_METADATA_MIN_AGE_SECONDS": 1,
        **dot,
    }


@pytest.fixture
def cimd_env(settings, cimd_dns, egress_guard) -> Iterator[CIMDEnv]:
    pki = shared_pki()
    cimd_settings(settings, pki)
    with DocumentServer(pki) as server:
        yield CIMDEnv(server=server, dns=cimd_dns, guard=egress_guard, pki=pki, settings=settings)


@pytest.fixture
def canary() -> Iterator[Canary]:
    listener = Canary()
    try:
        yield listener
    finally:
        listener.close()


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` passes (for ordering, never for a timed assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def with_members(document: dict, **members: Any) -> dict:
    """``document`` with ``members`` set (a ``None`` value removes the member)."""
    document = dict(document)
    for name, value in members.items():
        if value is None:
            document.pop(name, None)
        else:
            document[name] = value
    return document
