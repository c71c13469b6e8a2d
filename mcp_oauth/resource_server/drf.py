"""Django REST framework integration: the same bearer (and DPoP) checks and challenges as the MCP endpoint.

Usage on a view::

    class NotesView(APIView):
        authentication_classes = [MCPBearerAuthentication]
        permission_classes = [HasResourceScopes]
        required_scopes = ["notes:read"]
        mcp_resource = None  # or "https://host/api" (or "/api", relative to BASE_URL) for another resource
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import BasePermission

from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, resolve_resource
from mcp_oauth.resource_server.challenges import www_authenticate
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.scopes import missing as scope_missing


def _view_resource(view) -> ProtectedResource:
    uri = getattr(view, "mcp_resource", None)
    if isinstance(uri, str) and uri.startswith("/"):
        uri = mcp_oauth_settings.absolute(uri)  # a path: relative to MCP_OAUTH["BASE_URL"], as require_bearer
    try:
        return resolve_resource(uri)
    except ProtectedResource.DoesNotExist:
        raise exceptions.NotFound("No such protected resource.") from None


class InsufficientScope(exceptions.PermissionDenied):
    """403 ``insufficient_scope``; DRF copies ``auth_header`` into ``WWW-Authenticate``."""

    default_code = "insufficient_scope"

    def __init__(self, challenge: BearerChallenge) -> None:
        super().__init__(detail=challenge.error_description, code="insufficient_scope")
        self.auth_header = www_authenticate(
            challenge.resource,
            error=challenge.error,
            error_description=challenge.error_description,
            scopes=challenge.scopes,
            request=challenge.request,
            dpop=challenge.dpop,
        )


class InvalidBearer(exceptions.AuthenticationFailed):
    """401 with the challenge of the failed token in ``WWW-Authenticate``."""

    def __init__(self, challenge: BearerChallenge) -> None:
        super().__init__(detail=challenge.error_description or "Authentication required.")
        self.auth_header = www_authenticate(
            challenge.resource,
            error=challenge.error,
            error_description=challenge.error_description,
            scopes=challenge.scopes,
            request=challenge.request,
            dpop=challenge.dpop,  # RFC 9449 §7.1: a DPoP failure is a DPoP challenge
        )


class MCPBearerAuthentication(BaseAuthentication):
    """Authenticates ``Authorization: Bearer`` tokens bound to the view's resource.

    Sets ``request.auth`` to the :class:`~.authentication.BearerPrincipal`. A token
    without the resource's own scopes answers 403 ``insufficient_scope``;
    ``view.required_scopes`` are checked by :class:`HasResourceScopes`.
    """

    def authenticate(self, request):
        view = request.parser_context.get("view") if request.parser_context else None
        resource = _view_resource(view)
        try:
            principal = mcp_oauth_settings.adapter.authenticate_request(request._request, resource, ())
        except BearerChallenge as challenge:
            if challenge.error is None:
                return None  # no credentials: let other authenticators try, then 401 via authenticate_header
            if challenge.status == 403:
                raise InsufficientScope(challenge) from None
            failure = InvalidBearer(challenge)
            request._mcp_auth_header = failure.auth_header  # DRF asks authenticate_header() for the 401 header
            raise failure from None
        # A token without a user (client credentials) is anonymous, never None: request.user stays usable.
        return (principal.user if principal.user is not None else AnonymousUser(), principal)

    def authenticate_header(self, request) -> str:
        if getattr(request, "_mcp_auth_header", None):
            return request._mcp_auth_header
        view = request.parser_context.get("view") if request.parser_context else None
        return www_authenticate(_view_resource(view), request=request._request)


class HasResourceScopes(BasePermission):
    """Requires an MCP bearer principal with the resource's scopes plus ``view.required_scopes``."""

    def has_permission(self, request, view) -> bool:
        resource = _view_resource(view)
        principal = request.auth
        if principal is None:
            raise exceptions.NotAuthenticated()
        needed = list(dict.fromkeys([*resource.scope_list, *getattr(view, "required_scopes", ())]))
        missing = scope_missing(principal.scopes, needed)  # honours MCP_OAUTH["SCOPE_HIERARCHY"]
        if missing:
            raise InsufficientScope(
                BearerChallenge(
                    resource,
                    status=403,
                    error="insufficient_scope",
                    error_description="The access token lacks the scopes: " + " ".join(missing),
                    scopes=needed,  # every scope the view needs, whatever the token holds (MCP 2026-07-28)
                    request=request._request,
                )
            )
        return True
