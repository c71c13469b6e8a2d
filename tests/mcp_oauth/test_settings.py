"""MCP_OAUTH settings, the DOT secure defaults and the system checks."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.resource_uris import InvalidResource, canonicalize_resource


def check_ids():
    return {message.id for message in run_checks()}


def test_dot_secure_defaults_are_on():
    assert oauth2_settings.PKCE_REQUIRED is True
    assert oauth2_settings.COMPLIANT_BCP_RFC9700_PKCE_METHOD is True
    assert oauth2_settings.COMPLIANT_BCP_RFC9700_TOKEN_STORAGE is True
    assert oauth2_settings.COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS is True
    assert oauth2_settings.REFRESH_TOKEN_REUSE_PROTECTION is True
    assert oauth2_settings.ALLOW_LOCALHOST_LOOPBACK is True
    assert oauth2_settings.DCR_ENABLED is True
    assert oauth2_settings.OIDC_ISS_ENDPOINT == mcp_oauth_settings.issuer


def test_site_value_wins_and_check_warns(settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "PKCE_REQUIRED": False}
    assert oauth2_settings.PKCE_REQUIRED is False
    assert "mcp_oauth.W010" in check_ids()


def test_clean_configuration_passes_checks(settings):
    # The token cache is declared shared: on PostgreSQL (a multi-process site) the tests' per-process
    # cache would otherwise be W071's trade-off (tests/mcp_oauth/resource_server/test_revocation.py).
    settings.MCP_OAUTH = {
        "BASE_URL": "https://mcp.example.com",
        "REQUEST_STATE_KEYS": ["k" * 48],
        "TOKEN_CACHE_SHARED": True,
    }
    ids = check_ids()
    assert not {i for i in ids if i and i.startswith("mcp_oauth.")}


def test_missing_base_url_is_an_error(settings):
    settings.MCP_OAUTH = {}
    assert "mcp_oauth.E001" in check_ids()


def test_http_non_loopback_base_url_warns(settings):
    settings.MCP_OAUTH = {"BASE_URL": "http://mcp.example.com"}
    assert "mcp_oauth.W002" in check_ids()


def test_issuer_trailing_slash_is_an_error(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ISSUER": "https://mcp.example.com/"}
    assert "mcp_oauth.E003" in check_ids()


def test_unknown_setting_raises():
    with pytest.raises(AttributeError):
        mcp_oauth_settings.NOT_A_SETTING  # noqa: B018


@pytest.mark.parametrize(
    "raw, canonical",
    [
        ("https://Example.COM/mcp", "https://example.com/mcp"),
        ("HTTPS://example.com:443/mcp/", "https://example.com/mcp"),
        ("http://127.0.0.1:80/mcp", "http://127.0.0.1/mcp"),
        ("http://127.0.0.1:8000/mcp", "http://127.0.0.1:8000/mcp"),
        ("https://example.com", "https://example.com"),
        ("https://example.com/", "https://example.com"),
        ("http://[::1]:8080/mcp", "http://[::1]:8080/mcp"),
        ("https://example.com/MCP", "https://example.com/MCP"),
    ],
)
def test_canonical_resource(raw, canonical):
    assert canonicalize_resource(raw) == canonical


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "mcp",
        "ftp://example.com/x",
        "https://example.com/mcp#x",
        "https://u:p@example.com/",
        "https:///x",
        "https://example.com:99999/",
        " https://example.com/",
        "https://exa mple.com/",
        None,
        42,
    ],
)
def test_invalid_resources(raw):
    with pytest.raises(InvalidResource):
        canonicalize_resource(raw)


@pytest.mark.parametrize("path", ["no.such.module.registry", "mcp_oauth.settings.DEFAULTS"])
def test_bad_tool_registry_is_an_error(settings, path):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_REGISTRY": path}
    assert "mcp_oauth.E020" in check_ids()


def test_unresolvable_login_url_warns(settings):
    settings.LOGIN_URL = "/nowhere/login/"
    assert "mcp_oauth.W030" in check_ids()


def test_cimd_loopback_test_setting_in_production_is_an_error(settings):
    settings.DEBUG = False
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CIMD_ALLOW_LOOPBACK_FOR_TESTS": True}
    assert "mcp_oauth.E040" in check_ids()


def test_changing_oauth2_provider_rebuilds_the_cached_oauthlib_server(settings):
    """DOT caches its oauthlib server per view class; a settings change must not leave the old one
    (its token lifetime would leak into every later request)."""
    from mcp_oauth.authorization_server.views import MCPTokenView

    before = MCPTokenView.get_oauthlib_core()
    assert MCPTokenView.get_oauthlib_core() is before  # cached
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "ACCESS_TOKEN_EXPIRE_SECONDS": 2}
    after = MCPTokenView.get_oauthlib_core()
    assert after is not before
    # the lifetime is oauthlib's callable expires_in, reading the setting at each issue (tokens.lifetimes)
    from mcp_oauth.authorization_server.tokens.lifetimes import site_access_token_lifetime

    assert after.server.default_token_type.expires_in == after.server._expires_in
    assert site_access_token_lifetime() == 2
