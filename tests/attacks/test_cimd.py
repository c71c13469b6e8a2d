"""Hostile CIMD client_id URLs at the authorization and token endpoints.

Each one is refused with ``invalid_client`` or ``invalid_request`` on an error page
(never a redirect, never a 500), leaves no client behind, and reaches no listener
on loopback: the address-based ones run with loopback fetches *forbidden* and a
canary listener on the port they name; the content-based ones are served by the
local HTTPS document server (standing in for an attacker's public host, so loopback
is allowed for it) and any redirect they send points at the canary.
"""

from __future__ import annotations

import gzip
from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_application_model

from mcp_oauth.models import AuditEvent, ClientMetadataDocument
from tests.support.https_server import Route, canary, cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.oauth_helpers import pkce_pair

pytestmark = pytest.mark.django_db

# {p}: the canary's port. Every one of these must be refused before any connection.
ADDRESS_URLS = [
    "https://127.0.0.1:{p}/client.json",
    "https://2130706433:{p}/client.json",  # decimal
    "https://0x7f000001:{p}/client.json",  # hex
    "https://0177.0.0.1:{p}/client.json",  # octal
    "https://017700000001:{p}/client.json",  # octal, one number
    "https://127.1:{p}/client.json",  # short form
    "https://0x7f.1:{p}/client.json",  # mixed short form
    "https://127.0.0.2:{p}/client.json",  # the rest of 127/8
    "https://0.0.0.0:{p}/client.json",
    "https://0:{p}/client.json",
    "https://[::1]:{p}/client.json",
    "https://[0:0:0:0:0:0:0:1]:{p}/client.json",
    "https://[::ffff:127.0.0.1]:{p}/client.json",
    "https://[::ffff:7f00:1]:{p}/client.json",
    "https://[::]:{p}/client.json",
    "https://localhost:{p}/client.json",
    "https://localhost.:{p}/client.json",
    "https://LOCALHOST:{p}/client.json",
    "https://10.0.0.1/client.json",
    "https://172.16.5.4/client.json",
    "https://192.168.1.1/client.json",
    "https://169.254.169.254/latest/meta-data/",  # cloud metadata
    "https://100.64.0.1/client.json",  # CGNAT
    "https://100.100.100.200/latest/meta-data/",  # metadata (CGNAT range)
    "https://[fe80::1]/client.json",
    "https://[fd00:ec2::254]/latest/meta-data/",  # AWS IPv6 metadata
    "https://[64:ff9b::a9fe:a9fe]/client.json",  # NAT64 of 169.254.169.254
    "https://[2002:a9fe:a9fe::]/client.json",  # 6to4 of 169.254.169.254
    "https://224.0.0.1/client.json",  # multicast
    "https://240.0.0.1/client.json",  # reserved
    # Host names whose DNS answers are private (fake DNS below).
    "https://metadata.google.internal/computeMetadata/v1/instance",
    "https://internal.cimd.test/client.json",
    "https://cgnat.cimd.test/client.json",
    "https://mapped.cimd.test:{p}/client.json",
    "https://nat64.cimd.test/client.json",
    "https://sixtofour.cimd.test/client.json",
    "https://v6loop.cimd.test:{p}/client.json",
    "https://split.cimd.test/client.json",  # one public answer, one private
    "https://loop.cimd.test:{p}/client.json",
    "https://client.cimd.test:{p}/client.json",  # a name on 127.0.0.1, loopback not allowed
]

HOSTILE_DNS = {
    "metadata.google.internal": ["169.254.169.254"],
    "internal.cimd.test": ["10.1.2.3"],
    "cgnat.cimd.test": ["100.64.1.1"],
    "mapped.cimd.test": ["::ffff:127.0.0.1"],
    "nat64.cimd.test": ["64:ff9b::a9fe:a9fe"],
    "sixtofour.cimd.test": ["2002:7f00:1::"],
    "v6loop.cimd.test": ["::1"],
    "split.cimd.test": ["93.184.216.34", "10.0.0.1"],
    "loop.cimd.test": ["127.0.0.1"],
}


def authorize(client, client_id):
    _, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": "http://127.0.0.1/callback",
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "mcp",
    }
    return client.get("/oauth/authorize?" + urlencode(params))


def assert_refused(response, codes=("invalid_client", "invalid_request"), status=400):
    assert response.status_code == status, (response.status_code, response.content[-600:])
    assert "Location" not in response
    html = response.content.decode()
    assert any(f'<strong id="error-code">{code}</strong>' in html for code in codes), html[-600:]
    return html


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


@pytest.fixture
def hostile(cimd_env, canary):
    cimd_env.dns.names.update(HOSTILE_DNS)
    return cimd_env


@pytest.mark.parametrize("template", ADDRESS_URLS)
def test_address_refused_before_any_connection(hostile, canary, logged_in, template):
    hostile.allow_loopback(False)
    client_id = template.format(p=canary.port)
    html = assert_refused(authorize(logged_in, client_id), codes=("invalid_client",))
    assert "local, private or reserved address" in html
    assert canary.hits == 0 and hostile.server.connections == 0
    assert hostile.guard.attempts == []  # not even a connect() was tried
    assert not get_application_model().objects.filter(client_id=client_id).exists()
    assert AuditEvent.objects.filter(kind="cimd.ssrf_refused", client_id=client_id).count() == 1


@pytest.mark.parametrize("template", ["https://127.0.0.1:{p}/client.json", "https://loop.cimd.test:{p}/client.json"])
def test_address_refused_at_the_token_endpoint(hostile, canary, client, resource, template):
    hostile.allow_loopback(False)
    client_id = template.format(p=canary.port)
    response = client.post(
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": "c",
            "redirect_uri": "http://127.0.0.1/callback",
            "client_id": client_id,
            "code_verifier": "v" * 50,
        },
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_client"
    assert canary.hits == 0 and hostile.guard.attempts == []


def _redirect(status, target):
    return {"status": status, "headers": {"Location": target}, "body": b""}


# (path, route kwargs or a callable(env, canary) -> kwargs, expected phrase on the error page)
CONTENT_CASES = {
    "redirect-302-to-loopback": (lambda env, c: _redirect(302, f"https://127.0.0.1:{c.port}/client.json"), "redirect"),
    "redirect-301-to-metadata": (
        lambda env, c: _redirect(301, "https://169.254.169.254/latest/meta-data/"),
        "redirect",
    ),
    "redirect-307-to-private-name": (lambda env, c: _redirect(307, f"https://loop.cimd.test:{c.port}/x"), "redirect"),
    "redirect-308-to-same-host": (lambda env, c: _redirect(308, env.url("/other.json")), "redirect"),
    "oversize-with-length": (lambda env, c: {"body": env.document(env.url(), padding="x" * 6000)}, "larger than 5120"),
    "oversize-streamed": (
        lambda env, c: {"body": env.document(env.url(), padding="x" * 6000), "content_length": False},
        "larger than 5120",
    ),
    "slow-drip-body": (lambda env, c: {"body": env.document(env.url()), "drip": 0.1}, "took too long"),
    "slow-headers": (lambda env, c: {"body": env.document(env.url()), "delay": 3}, "took too long"),
    "html-content-type": (
        lambda env, c: {"body": env.document(env.url()), "content_type": "text/html"},
        "not served as JSON",
    ),
    "no-content-type": (lambda env, c: {"body": env.document(env.url()), "content_type": None}, "not served as JSON"),
    "gzip-bomb": (
        lambda env, c: {"body": gzip.compress(b"{" + b" " * 5_000_000 + b"}"), "headers": {"Content-Encoding": "gzip"}},
        "without Content-Encoding",
    ),
    "status-404": (lambda env, c: {"status": 404, "body": env.document(env.url())}, "HTTP 404"),
    "status-500": (lambda env, c: {"status": 500, "body": env.document(env.url())}, "HTTP 500"),
    "status-204": (lambda env, c: {"status": 204, "body": b""}, "HTTP 204"),
    "json-array": (lambda env, c: {"body": [env.document(env.url())]}, "JSON object"),
    "json-string": (lambda env, c: {"body": env.url()}, "JSON object"),
    "invalid-utf8": (lambda env, c: {"body": b'{"client_id": "\xff\xfe"}'}, "UTF-8 JSON"),
    "duplicate-client-id": (
        lambda env, c: {"body": b'{"client_id": "https://a.example/x", "client_id": "%s"}' % env.url().encode()},
        "UTF-8 JSON",
    ),
    "client-id-trailing-slash": (lambda env, c: {"body": env.document(env.url() + "/")}, "does not match"),
    "client-id-other-host": (lambda env, c: {"body": env.document(env.url(host="other.cimd.test"))}, "does not match"),
    "client-id-case": (
        lambda env, c: {"body": env.document(env.url().replace("client", "CLIENT", 1))},
        "does not match",
    ),
    "client-id-default-port": (
        lambda env, c: {"body": env.document(env.url().replace(f":{env.server.port}", ":443"))},
        "does not match",
    ),
    "client-secret-empty": (lambda env, c: {"body": env.document(env.url(), client_secret="")}, "client_secret"),
    "client-secret-expires-at": (
        lambda env, c: {"body": env.document(env.url(), client_secret_expires_at=0)},
        "client_secret_expires_at",
    ),
    "auth-client-secret-basic": (
        lambda env, c: {"body": env.document(env.url(), token_endpoint_auth_method="client_secret_basic")},
        "shared secret",
    ),
    "auth-client-secret-post": (
        lambda env, c: {"body": env.document(env.url(), token_endpoint_auth_method="client_secret_post")},
        "shared secret",
    ),
    "auth-client-secret-jwt": (
        lambda env, c: {"body": env.document(env.url(), token_endpoint_auth_method="client_secret_jwt")},
        "shared secret",
    ),
    "auth-private-key-jwt": (
        lambda env, c: {"body": env.document(env.url(), token_endpoint_auth_method="private_key_jwt")},
        "none",
    ),
    "private-jwk": (
        lambda env, c: {"body": env.document(env.url(), jwks={"keys": [{"kty": "EC", "d": "secret"}]})},
        "private",
    ),
    "missing-client-name": (lambda env, c: {"body": env.document(env.url(), client_name=None)}, "no client_name"),
    "missing-redirect-uris": (lambda env, c: {"body": env.document(env.url(), redirect_uris=None)}, "no redirect_uris"),
    "javascript-redirect": (
        lambda env, c: {"body": env.document(env.url(), redirect_uris=["javascript:alert(1)//"])},
        "Redirect URIs",
    ),
    "http-non-loopback-redirect": (
        lambda env, c: {"body": env.document(env.url(), redirect_uris=["http://evil.example/cb"])},
        "Redirect URIs",
    ),
    "nul-in-document": (lambda env, c: {"body": env.document(env.url(), note="a\x00b")}, "NUL"),
}


TRANSIENT_CASES = {"slow-drip-body", "slow-headers", "status-500"}


@pytest.mark.parametrize("case", sorted(CONTENT_CASES))
def test_hostile_document_refused(hostile, canary, logged_in, settings, case):
    # A short fetch deadline only where the case is about time: elsewhere a loaded machine must not
    # turn the case into a (transient) time-out.
    timeout = 0.5 if case in ("slow-drip-body", "slow-headers") else 5
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": timeout}
    make, phrase = CONTENT_CASES[case]
    hostile.server.serve("/client.json", Route(**make(hostile, canary)))
    client_id = hostile.url()
    # A 5xx or a time-out says nothing about the client: temporarily_unavailable (503, Retry-After)
    transient = case in TRANSIENT_CASES
    expected = {"codes": ("temporarily_unavailable",), "status": 503} if transient else {"codes": ("invalid_client",)}
    response = authorize(logged_in, client_id)
    html = assert_refused(response, **expected)
    if transient:
        assert int(response["Retry-After"]) >= 1
    assert phrase in html, html[-600:]
    assert canary.hits == 0
    assert len(hostile.server.fetches()) == 1  # one fetch, no redirect followed, no retry
    assert hostile.guard.refused == []
    cached = ClientMetadataDocument.objects.get(client_id=client_id)
    assert cached.document is None and cached.application_id is None and cached.last_error
    assert not get_application_model().objects.filter(client_id=client_id).exists()
    assert AuditEvent.objects.filter(kind="cimd.fetch_failed", client_id=client_id).count() == 1
    # The failure is backed off, not cached as valid: a second try is refused without a fetch.
    assert_refused(authorize(logged_in, client_id), **expected)
    assert len(hostile.server.fetches()) == 1


@pytest.mark.parametrize(
    "client_id",
    [
        "http://client.cimd.test/client.json",
        "HTTPS://client.cimd.test/client.json",
        "https://client.cimd.test",
        "https://client.cimd.test/",
        "https://client.cimd.test/./client.json",
        "https://client.cimd.test/a/../client.json",
        "https://client.cimd.test/%2e%2e/client.json",
        "https://client.cimd.test/client.json#fragment",
        "https://user:pass@client.cimd.test/client.json",
        "https://client.cimd.test/client json",
        "https://client.cimd.test/\x7fclient.json",
        "https://client.cimd.test/" + "a" * 300,
        "https://client.cimd.test:99999/client.json",
        "https://8.8.8.8/client.json",
        "javascript://client.cimd.test/%0aalert(1)",
        "ftp://client.cimd.test/client.json",
    ],
)
def test_malformed_client_id_urls(cimd_env, logged_in, client_id):
    assert_refused(authorize(logged_in, client_id), codes=("invalid_request",))
    assert cimd_env.server.connections == 0 and cimd_env.dns.lookups == []
    assert not ClientMetadataDocument.objects.exists()


NASTY_URLS = [
    "https://",
    "https:",
    "https:///",
    "https://\x00/x",
    "https://a\x00b.example/x",
    "https://é.example/x",
    "https://[::1",
    "https://[zz]/x",
    "https://a:b:c/x",
    "https://host:-1/x",
    "https://host:+443/x",
    "https://host/%",
    "https://host/%zz",
    "https://host/%ED%A0%80",
    "https://" + "a" * 5000 + "/x",
    "https://" + "a." * 130 + "com/x",
    "https://-bad-.example/x",
    "https://host..example/x",
    "https://.example/x",
    "https://host/x\r\nX-Injected: 1",
    "https://host/\u202e",
    "https://xn--/x",
    "https://host?/x",
    "https://host#/x",
]


@pytest.mark.parametrize("client_id", NASTY_URLS)
def test_nasty_url_client_ids_never_500(cimd_env, logged_in, client_id):
    response = authorize(logged_in, client_id)
    assert response.status_code == 400, response.content[-400:]
    assert "Location" not in response
    token = logged_in.post(
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": "c",
            "redirect_uri": "http://127.0.0.1/callback",
            "client_id": client_id,
            "code_verifier": "v" * 50,
        },
    )
    assert token.status_code in (400, 401) and token.json()["error"] in ("invalid_client", "invalid_request")
    assert cimd_env.server.connections == 0
