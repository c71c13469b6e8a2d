"""Discovery documents: RFC 8414 AS metadata, OpenID Connect discovery, RFC 9728 PRM.

All absolute URLs come from ``MCP_OAUTH["BASE_URL"]`` / ``ISSUER``, never from
the request's Host header (RFC 9700 §4.13). The issuer string is the same
everywhere: AS metadata ``issuer``, PRM ``authorization_servers`` and the RFC
9207 ``iss`` parameter.
"""

from __future__ import annotations

import json

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views import View
from oauth2_provider.compat import login_not_required
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import OAuthServerMetadataView

from mcp_oauth.authorization_server.enterprise_identity.assertion_metadata import add_assertion_metadata
from mcp_oauth.authorization_server.token_exchange.decision import TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.dpop import metadata as dpop_metadata
from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.challenges import PRM_WELL_KNOWN
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.origins import as_requested
from mcp_oauth.shared.resource_uris import InvalidResource
from mcp_oauth.shared.scopes import advertised


def _json(data: dict) -> JsonResponse:
    response = JsonResponse(data)
    response["Access-Control-Allow-Origin"] = "*"
    response["Cache-Control"] = "public, max-age=300"
    return response


class AuthorizationServerMetadataView(OAuthServerMetadataView):
    """RFC 8414 §3 metadata (also served as OpenID Connect discovery, OIDC Discovery §4).

    Served at ``/.well-known/oauth-authorization-server`` (root form and RFC 8414
    §3.1 path-inserted form ``/.well-known/oauth-authorization-server/<issuer path>``),
    ``/.well-known/openid-configuration[/<issuer path>]`` and
    ``/<issuer path>/.well-known/openid-configuration``. Any other suffix is 404.
    """

    def get(self, request: HttpRequest, *args, issuer_path: str | None = None, **kwargs) -> HttpResponse:
        if issuer_path is not None and issuer_path.strip("/") != mcp_oauth_settings.issuer_path:
            raise Http404("No authorization server with that issuer.")
        data = json.loads(super().get(request, *args, **kwargs).content)
        data["issuer"] = mcp_oauth_settings.issuer
        data["code_challenge_methods_supported"] = ["S256"]
        data["authorization_response_iss_parameter_supported"] = True
        add_assertion_metadata(data)  # private_key_jwt, its algorithms, the jwt-bearer grant (ID-JAG)
        if mcp_oauth_settings.TOKEN_EXCHANGE and TOKEN_EXCHANGE_GRANT_TYPE not in data["grant_types_supported"]:
            data["grant_types_supported"].append(TOKEN_EXCHANGE_GRANT_TYPE)  # RFC 8693
        confidential = [m for m in data.get("token_endpoint_auth_methods_supported", []) if m != "none"]
        if "introspection_endpoint" in data:  # RFC 7662 §2.1: callers authenticate
            data["introspection_endpoint_auth_methods_supported"] = confidential
        if "revocation_endpoint" in data:  # RFC 7009 §2.1: as at the token endpoint (public clients: none)
            data["revocation_endpoint_auth_methods_supported"] = list(
                data.get("token_endpoint_auth_methods_supported", [])
            )
        data.setdefault("response_modes_supported", ["query"])
        data.update(dpop_metadata.authorization_server_metadata())  # RFC 9449 §5.1
        jwks_uri = self._get_endpoint_url(request, "access-token-jwks")  # RFC 9068 signing keys
        if jwks_uri:
            data["jwks_uri"] = jwks_uri
        return _json(data)


@method_decorator(login_not_required, name="dispatch")
class ProtectedResourceMetadataView(View):
    """RFC 9728 §3 metadata of one registered resource.

    ``/.well-known/oauth-protected-resource/<path>`` describes the resource
    ``BASE_URL/<path>`` (§3.1 path insertion); the root form describes the default
    resource. Shape: ``{"resource", "authorization_servers", "scopes_supported",
    "bearer_methods_supported": ["header"], "resource_name"?, "resource_documentation"?}``.
    Unknown resources are 404.
    """

    def get(self, request: HttpRequest, resource_path: str | None = None) -> HttpResponse:
        try:
            if resource_path:
                resource = ProtectedResource.objects.get_by_uri(mcp_oauth_settings.absolute("/" + resource_path))
            else:
                resource = ProtectedResource.objects.default()
        except (ProtectedResource.DoesNotExist, InvalidResource):
            raise Http404("No protected resource at that path.") from None
        return _json(protected_resource_metadata(resource, request))


def protected_resource_metadata(resource: ProtectedResource, request: HttpRequest | None = None) -> dict:
    """The RFC 9728 document of ``resource`` (see :class:`ProtectedResourceMetadataView`).

    ``resource`` is written in the loopback spelling ``request`` used on a loopback development
    site (:mod:`mcp_oauth.shared.origins`), so that it matches the URL the client was given (§3.3).
    """
    data = {
        "resource": as_requested(resource.uri, request),
        "authorization_servers": [mcp_oauth_settings.issuer],
        # never offline_access (MCP 2026-07-28): refresh tokens are the AS's business
        "scopes_supported": advertised(resource.scope_list or sorted(oauth2_settings.SCOPES)),
        "bearer_methods_supported": ["header"],
    }
    if resource.name:
        data["resource_name"] = resource.name
    if resource.documentation:
        data["resource_documentation"] = resource.documentation
    data.update(dpop_metadata.protected_resource_metadata(resource))  # RFC 9728 §2, RFC 9449 §7
    return data


__all__ = ["AuthorizationServerMetadataView", "ProtectedResourceMetadataView", "PRM_WELL_KNOWN"]
