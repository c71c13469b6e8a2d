"""URLs of the app. Include them at the site root: ``path("", include("mcp_oauth.urls"))``.

* well-known documents at the root (RFC 8414 §3.1, RFC 9728 §3.1, OIDC Discovery §4),
  whatever prefix the OAuth endpoints have;
* OAuth endpoints under ``oauth/`` in the ``oauth2_provider`` namespace, so DOT's
  own code (metadata, registration URIs) finds them; they replace
  ``include("oauth2_provider.urls")``;
* the signed-in user's connected-apps page at ``oauth/connected-apps/`` (URL name
  ``mcp-oauth-connected-apps``): the clients they authorized, revoke one;
* the MCP endpoint at ``MCP_OAUTH["MCP_PATH"]`` (``/mcp``; ``/mcp/`` is served too, never redirected),
  and each organization's own at ``<MCP_PATH>/o/<slug>`` (URL name ``mcp-organization-endpoint``);
* the app's own login page at ``oauth/login`` (``mcp-oauth-login``), used when the site has none
  (see :mod:`mcp_oauth.authorization_server.pages.login`);
* the liveness and readiness probes at ``MCP_OAUTH["LIVENESS_PATH"]`` / ``["READINESS_PATH"]``
  (``/healthz``, ``/readyz``; :mod:`mcp_oauth.health`), for a site that does not serve them
  before Django with :func:`mcp_oauth.health.health_lane`;
* the Prometheus metrics at ``MCP_OAUTH["METRICS_PATH"]`` (``/metrics``, URL name
  ``mcp-oauth-metrics``; 404 unless ``METRICS_ENABLED``, :mod:`mcp_oauth.observability.metrics_view`).
"""

import re

from django.urls import include, path, re_path
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods

from mcp_oauth.authorization_server.client_registry.registration import (
    MCPRegistrationManagementView,
    MCPRegistrationView,
)
from mcp_oauth.authorization_server.jwks_view import jwks_view
from mcp_oauth.authorization_server.metadata import (
    AuthorizationServerMetadataView,
    ProtectedResourceMetadataView,
)
from mcp_oauth.authorization_server.pages.authorize import MCPAuthorizationView
from mcp_oauth.authorization_server.pages.connected_apps import connected_apps
from mcp_oauth.authorization_server.pages.login import LOGIN_URL_NAME, MCPLoginView
from mcp_oauth.authorization_server.token_endpoint.guards import guard_oauth_form
from mcp_oauth.authorization_server.views import (
    MCPIntrospectTokenView,
    MCPRevokeTokenView,
    MCPTokenView,
)
from mcp_oauth.health import liveness_view, readiness_view
from mcp_oauth.mcp_server.transport.views import mcp_endpoint
from mcp_oauth.observability.metrics_view import metrics_view
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.cors import public_cors
from mcp_oauth.shared.organization_paths import path_pattern as organization_path_pattern
from mcp_oauth.shared.text import refuse_unstorable_params

# GET-only documents: CSRF-exempt so other methods get 405, not a CSRF page.
as_metadata = public_cors(csrf_exempt(AuthorizationServerMetadataView.as_view()), "GET, OPTIONS")
prm = public_cors(csrf_exempt(ProtectedResourceMetadataView.as_view()), "GET, OPTIONS")
# GET and POST only (405 otherwise, before any CSRF check); CSRF still guards the consent POST.
authorization_endpoint = csrf_exempt(
    require_http_methods(["GET", "HEAD", "POST"])(
        csrf_protect(refuse_unstorable_params(MCPAuthorizationView.as_view()))
    )
)

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
    path("authorize", authorization_endpoint, name="authorize"),
    path("token", public_cors(guard_oauth_form(MCPTokenView.as_view()), "POST, OPTIONS"), name="token"),
    path("revoke", public_cors(guard_oauth_form(MCPRevokeTokenView.as_view()), "POST, OPTIONS"), name="revoke-token"),
    path("introspect", guard_oauth_form(MCPIntrospectTokenView.as_view()), name="introspect"),
    path("jwks", public_cors(csrf_exempt(jwks_view), "GET, OPTIONS"), name="access-token-jwks"),
    path("register", public_cors(MCPRegistrationView.as_view(), "POST, OPTIONS"), name="dcr-register"),
    path(
        "register/<str:client_id>",
        public_cors(MCPRegistrationManagementView.as_view(), "GET, PUT, DELETE, OPTIONS"),
        name="dcr-register-management",
    ),
    path(".well-known/oauth-authorization-server", as_metadata, name="oauth-server-metadata"),
    path(".well-known/oauth-protected-resource", prm, name="oauth-resource-metadata"),
]

_mcp_path = re.escape(mcp_oauth_settings.MCP_PATH.strip("/"))

health_urlpatterns = [
    path(str(probe_path).lstrip("/"), csrf_exempt(view), name=name)
    for probe_path, view, name in (
        (mcp_oauth_settings.LIVENESS_PATH, liveness_view, "mcp-oauth-liveness"),
        (mcp_oauth_settings.READINESS_PATH, readiness_view, "mcp-oauth-readiness"),
    )
    if probe_path
]

# Prometheus metrics (404 while METRICS_ENABLED is off; mcp_oauth.observability.metrics_view).
metrics_urlpatterns = (
    [path(str(mcp_oauth_settings.METRICS_PATH).lstrip("/"), metrics_view, name="mcp-oauth-metrics")]
    if mcp_oauth_settings.METRICS_PATH
    else []
)

urlpatterns = [
    *well_known_urlpatterns,
    *health_urlpatterns,
    *metrics_urlpatterns,
    path("oauth/login", MCPLoginView.as_view(), name=LOGIN_URL_NAME),
    path("oauth/", include((oauth_urlpatterns, "oauth2_provider"))),
    path("oauth/connected-apps/", connected_apps, name="mcp-oauth-connected-apps"),
    re_path(rf"^{_mcp_path}/?$", mcp_endpoint, name="mcp-endpoint"),
    # Each organization's own endpoint (MCP_OAUTH["ORGANIZATION_ENDPOINTS"]): the same view, the
    # resource registry says whether the organization's ProtectedResource is enabled (else 404).
    re_path(organization_path_pattern(leading_slash=False), mcp_endpoint, name="mcp-organization-endpoint"),
]
