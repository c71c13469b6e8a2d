"""The app's URLs (mcp_oauth.urls) at the site root: the OAuth endpoints under ``oauth/`` in DOT's
namespace, the RFC 8414 / OIDC / RFC 9728 well-known documents, the MCP endpoint at ``MCP_PATH``."""

from __future__ import annotations

import pytest
from django.urls import Resolver404, resolve, reverse


@pytest.mark.parametrize(
    ("name", "args", "path"),
    [
        ("oauth2_provider:authorize", [], "/oauth/authorize"),
        ("oauth2_provider:token", [], "/oauth/token"),
        ("oauth2_provider:revoke-token", [], "/oauth/revoke"),
        ("oauth2_provider:introspect", [], "/oauth/introspect"),
        ("oauth2_provider:dcr-register", [], "/oauth/register"),
        ("oauth2_provider:dcr-register-management", ["abc"], "/oauth/register/abc"),
        ("mcp-oauth-protected-resource", [], "/.well-known/oauth-protected-resource"),
        ("mcp-oauth-connected-apps", [], "/oauth/connected-apps/"),
        ("mcp-endpoint", [], "/mcp"),
    ],
)
def test_named_routes(name, args, path):
    assert reverse(name, args=args) == path


@pytest.mark.parametrize(
    ("path", "kwargs"),
    [
        ("/.well-known/oauth-authorization-server", {}),
        ("/.well-known/oauth-authorization-server/tenant/a", {"issuer_path": "tenant/a"}),  # RFC 8414 §3.1
        ("/.well-known/openid-configuration", {}),
        ("/.well-known/openid-configuration/tenant", {"issuer_path": "tenant"}),
        ("/tenant/.well-known/openid-configuration", {"issuer_path": "tenant"}),  # OIDC Discovery §4
        ("/.well-known/oauth-protected-resource/mcp", {"resource_path": "mcp"}),  # RFC 9728 §3.1
    ],
)
def test_the_well_known_documents_resolve_with_their_paths(path, kwargs):
    assert resolve(path).kwargs == kwargs


def test_the_mcp_endpoint_takes_an_optional_trailing_slash_and_nothing_more():
    assert resolve("/mcp").url_name == resolve("/mcp/").url_name == "mcp-endpoint"
    with pytest.raises(Resolver404):
        resolve("/mcp/extra")
