"""Attacks on the protected metrics endpoint (mcp_oauth.observability.metrics_view): the caller's
address is REMOTE_ADDR only (never a header the caller writes), and the bearer token is matched
whole."""

from __future__ import annotations

import pytest

from mcp_oauth.observability import metrics
from mcp_oauth.observability.metrics_view import address_allowed, token_accepted

pytestmark = pytest.mark.django_db

TOKEN = "s3cret-scrape-token"


@pytest.fixture
def metrics_on(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ENABLED": True}
    assert metrics.active() is not None


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-For": "127.0.0.1"},
        {"X-Real-IP": "127.0.0.1"},
        {"Forwarded": "for=127.0.0.1"},
        {"X-Forwarded-For": "127.0.0.1, 203.0.113.9"},
        {"X-Client-IP": "::1", "True-Client-IP": "127.0.0.1"},
    ],
)
def test_forwarding_headers_do_not_make_a_remote_caller_loopback(client, metrics_on, headers):
    response = client.get("/metrics", headers=headers, REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 403
    assert response.content == b"Forbidden\n"


@pytest.mark.parametrize(
    ("remote", "allowed"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),  # IPv4-mapped loopback (a dual-stack socket)
        ("::ffff:203.0.113.9", False),  # IPv4-mapped, not loopback
        ("::ffff:7f00:1", True),  # the same mapped address, hex spelled
        ("0:0:0:0:0:ffff:7f00:0001", True),
        ("::127.0.0.1", False),  # IPv4-compatible (deprecated) is not loopback
        ("0.0.0.0", False),
        ("::", False),
        ("127.0.0.1.evil.example", False),
        ("127.1", False),  # inet_aton shorthand is not an address here
        ("0177.0.0.1", False),  # octal spelling is refused, not read as 127.0.0.1
        ("", False),
        (None, False),
        ("fe80::1%eth0", False),
        ("\x00127.0.0.1", False),
        ("1" * 10_000, False),
    ],
)
def test_address_spellings(settings, remote, allowed):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ENABLED": True}
    assert address_allowed(remote) is allowed


def test_a_mapped_address_matches_an_ipv4_network(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_ALLOWED_NETWORKS": ["10.0.0.0/8"]}
    assert address_allowed("::ffff:10.1.2.3") is True
    assert address_allowed("::ffff:11.1.2.3") is False


@pytest.mark.parametrize(
    "authorization",
    [
        "",
        "Bearer",
        "Bearer ",
        "Bearer  ",
        "Basic " + TOKEN,
        TOKEN,
        "Bearer " + TOKEN[:-1],
        "Bearer " + TOKEN + "x",
        "Bearer " + TOKEN.upper(),
        "Bearer " + TOKEN + "\x00",
        "Bearer " + "A" * 100_000,
        "Bearer " + "é" * 20,
        "Bearer s3cret-scrape-token, Bearer other",
    ],
)
def test_a_missing_or_wrong_token_is_401(client, settings, metrics_on, authorization):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_BEARER_TOKEN": TOKEN}
    assert token_accepted(authorization) is False
    response = client.get("/metrics", headers={"Authorization": authorization} if authorization else {})
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert response["Cache-Control"] == "no-store"
    assert TOKEN.encode() not in response.content


@pytest.mark.parametrize("authorization", ["Bearer " + TOKEN, "bearer " + TOKEN, "BEARER  " + TOKEN + " "])
def test_the_token_in_any_case_of_the_scheme(client, settings, metrics_on, authorization):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_BEARER_TOKEN": TOKEN}
    assert client.get("/metrics", headers={"Authorization": authorization}).status_code == 200


def test_the_token_is_never_in_the_exposition(client, settings, metrics_on):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_BEARER_TOKEN": TOKEN}
    response = client.get("/metrics", headers={"Authorization": "Bearer " + TOKEN})
    assert response.status_code == 200
    assert TOKEN.encode() not in response.content


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_other_methods_are_405_before_any_address_or_token_check(client, metrics_on, method):
    response = client.generic(method, "/metrics", REMOTE_ADDR="203.0.113.9")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
