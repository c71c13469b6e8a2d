"""URLs of the app. Include them at the site root: ``path("", include("mcp_oauth.urls"))``.

* well-known documents at the root (RFC 8414 §3.1, RFC 9728 §3.1, OIDC Discovery §4),
  whatever prefix the OAuth endpoints have;
* OAuth endpoints under ``oauth/`` in the ``oauth2_provider`` namespace, so DOT's
  own code (metadata, registration URIs) finds them; they replace
  ``include("oauth2_provider.urls")``;
* the MCP endpoint at ``MCP_OAUTH["MCP_PATH"]`` (``/mcp``; ``/mcp/`` is served too, never redirected).
"""

from django.urls import include, path, re_path
from oauth2_provider.views import (
    DynamicClientRegistrationManagementView,
)

import re

from .authorization_server.metadata import AuthorizationServerMetadataView, ProtectedResourceMetadataView
from .authorization_server.registration import MCPRegistrationView
from .authorization_server.views import (
    MCPAuthorizationView,
    MCPIntrospectTokenView,
    MCPRevokeTokenView,
    MCPTokenView,
)
from .cors import public_cors
from .text import refuse_unstorable_params
from .settings import mcp_oauth_settings
from .transport.views import mcp_endpoint

as_metadata = public_cors(AuthorizationServerMetadataView.as_view(), "GET, OPTIONS")
prm = public_cors(ProtectedResourceMetadataView.as_view(), "GET, OPTIONS")

well_known_urlpatterns = [
    path(".well-known/oauth-authorization-server", as_metadata),
    path(".well-known/oauth-authorization-server/<path:issuer_path>", as_metadata),
    path(".well-known/openid-configuration", as_metadata),
    path(".well-known/openid-configuration/<path:issuer_path>", as_metadata),
    re_path(r"^(?P<issuer_path>.+)/\.well-known/openid-configuration$", as_metadata),
    path(".well-known/oauth-protected-resource", prm, name="mcp-oauth-protected-resource"),
    path(".well-known/oauth-protected-resource/<path:resource_path>", prm),
]

oauth_urlpatterns = [
    path("authorize", refuse_unstorable_params(MCPAuthorizationView.as_view()), name="authorize"),
    path("token", public_cors(refuse_unstorable_params(MCPTokenView.as_view()), "POST, OPTIONS"), name="token"),
    path("revoke", public_cors(refuse_unstorable_params(MCPRevokeTokenView.as_view()), "POST, OPTIONS"), name="revoke-token"),
    path("introspect", refuse_unstorable_params(MCPIntrospectTokenView.as_view()), name="introspect"),
    path("register", public_cors(MCPRegistrationView.as_view(), "POST, OPTIONS"), name="dcr-register"),
    path(
        "register/<str:client_id>",
        public_cors(DynamicClientRegistrationManagementView.as_view(), "GET, PUT, DELETE, OPTIONS"),
        name="dcr-register-management",
    ),
    path(".well-known/oauth-authorization-server", as_metadata, name="oauth-server-metadata"),
    path(".well-known/oauth-protected-resource", prm, name="oauth-resource-metadata"),
]

_mcp_path = re.escape(mcp_oauth_settings.MCP_PATH.strip("/"))

urlpatterns = [
    *well_known_urlpatterns,
    path("oauth/", include((oauth_urlpatterns, "oauth2_provider"))),
    re_path(rf"^{_mcp_path}/?$", mcp_endpoint, name="mcp-endpoint"),
]
