"""Redirect URI matching (mcp_oauth.shared.redirect_uris): exact string comparison (OAuth 2.1 §4.1.1,
RFC 9700 §4.1.3) except the port of a loopback redirect (RFC 8252 §7.3); http on loopback only."""

from __future__ import annotations

import pytest

from mcp_oauth.shared.redirect_uris import redirect_scheme_allowed, redirect_uri_registered

REGISTERED = ["https://app.example.com/callback", "http://127.0.0.1/cb", "http://localhost:8000/done?x=1"]


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example.com/callback",
        "http://127.0.0.1/cb",
        "http://127.0.0.1:53117/cb",  # any port on a loopback redirect
        "http://localhost/done?x=1",
        "http://localhost:9/done?x=1",
    ],
)
def test_registered_uris_match(uri):
    assert redirect_uri_registered(uri, REGISTERED) is True


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example.com/callback/",  # one character more
        "https://APP.example.com/callback",  # no normalisation
        "https://app.example.com:443/callback",
        "https://app.example.com/callback?extra=1",
        "https://app.example.com/callback#fragment",
        "http://127.0.0.1/cb#x",  # a fragment never matches, even on loopback
        "http://127.0.0.1:80/other",
        "http://[::1]/cb",  # another loopback spelling is another URI
        "http://localhost:8000/done?x=2",
        "https://127.0.0.1:443/cb",  # the port exception is for http loopback URIs only
    ],
)
def test_anything_else_does_not(uri):
    assert redirect_uri_registered(uri, REGISTERED) is False


def test_nothing_matches_an_empty_registration():
    assert redirect_uri_registered("http://127.0.0.1/cb", []) is False


@pytest.mark.parametrize(
    ("uri", "allowed"),
    [
        ("https://app.example.com/cb", True),
        ("HTTPS://app.example.com/cb", True),
        ("http://127.0.0.1:8000/cb", True),
        ("http://[::1]/cb", True),
        ("http://localhost/cb", True),
        ("http://app.example.com/cb", False),
        ("javascript:alert(1)", False),
        ("data:text/html,hi", False),
        ("", False),
        ("http://[::1/cb", False),  # malformed
    ],
)
def test_redirect_schemes(uri, allowed):
    assert redirect_scheme_allowed(uri) is allowed


def test_a_private_use_scheme_the_site_lists_is_allowed(settings):
    assert redirect_scheme_allowed("com.example.app:/oauth2redirect") is False
    settings.OAUTH2_PROVIDER = {
        **getattr(settings, "OAUTH2_PROVIDER", {}),
        "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https", "com.example.app"],
    }
    assert redirect_scheme_allowed("com.example.app:/oauth2redirect") is True
    assert redirect_scheme_allowed("http://app.example.com/cb") is False  # http stays loopback-only
