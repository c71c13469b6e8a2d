"""Loopback hosts (mcp_oauth.shared.loopback, RFC 8252 §7.3, §8.3): the one place plain http is acceptable."""

from __future__ import annotations

import pytest

from mcp_oauth.shared.loopback import is_https_or_loopback, is_loopback_host


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "127.0.0.1", "127.8.9.10", "::1", "[::1]"])
def test_loopback_hosts(host):
    assert is_loopback_host(host) is True


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "localhost.example.com",
        "mylocalhost",
        "10.0.0.1",
        "0.0.0.0",
        "::",
        "[::2]",
        "128.0.0.1",
        "::ffff:8.8.8.8",
    ],
)
def test_other_hosts_are_not_loopback(host):
    assert is_loopback_host(host) is False


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com/cb", True),
        ("https://example.com", True),
        ("http://127.0.0.1:8080/cb", True),
        ("http://localhost/cb", True),
        ("http://[::1]:3000/", True),
        ("http://example.com/cb", False),
        ("https:///no-host", False),
        ("ftp://127.0.0.1/", False),
        ("", False),
        (None, False),
        ("127.0.0.1/cb", False),
    ],
)
def test_https_or_loopback(url, expected):
    assert is_https_or_loopback(url) is expected
