"""RFC 7591 dynamic client registration: DOT's endpoint, completed.

* Responses carry everything RFC 7591 §3.2.1 asks for: ``client_id_issued_at``,
  ``client_secret_expires_at`` whenever a secret is issued, and the accepted
  metadata echoed back (``scope``, ``client_uri``, ``logo_uri``, …).
* ``token_endpoint_auth_method`` is echoed as requested (``none`` makes a public client).
* Unknown members are ignored (§2); a refused registration names the field.
* Redirect URIs must be https, or http on a loopback host (OAuth 2.1 §2.3.1,
  RFC 8252 §7.3; loopback ones then match on any port).
* Anonymous registration is open to public clients only, unless
  ``DCR_ALLOW_ANONYMOUS_CONFIDENTIAL`` says otherwise.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.dcr import IsAuthenticatedDCRPermission
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import DynamicClientRegistrationView

from ..models import ClientProfile
from ..settings import mcp_oauth_settings
from ..text import storable
from .views import is_loopback_host

#: Client metadata (RFC 7591 §2) that is stored and echoed back when accepted.
ECHOED_STRING_FIELDS = ("client_name", "scope", "client_uri", "logo_uri", "tos_uri", "policy_uri",
                        "software_id", "software_version", "application_type", "jwks_uri")
URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")


class RegistrationError(Exception):
    """A refused registration: ``error`` is an RFC 7591 §3.2.2 code, the message names the field."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def _error(error: str, description: str, status: int = 400) -> HttpResponse:
    response = JsonResponse({"error": error, "error_description": description}, status=status)
    response["Cache-Control"] = "no-store"
    return response


def parse_body(request: HttpRequest) -> dict[str, Any]:
    """The registration request's JSON object.

    :raises RegistrationError: ``invalid_client_metadata`` for a body that is not a JSON object.
    """
    try:
        data = json.loads(request.body or b"")
    except (ValueError, UnicodeDecodeError):
        raise RegistrationError("invalid_client_metadata", "The request body must be a JSON object.") from None
    if not isinstance(data, dict):
        raise RegistrationError("invalid_client_metadata", "The request body must be a JSON object.")
    if not storable(data):
        raise RegistrationError("invalid_client_metadata", "Client metadata must be text without NUL characters.")
    return data


def validate_redirect_uri(uri: Any) -> None:
    """https, or http on a loopback host; absolute, no fragment, no userinfo.

    :raises RegistrationError: ``invalid_redirect_uri`` naming the URI.
    """
    if not isinstance(uri, str) or not uri or any(ch.isspace() for ch in uri):
        raise RegistrationError("invalid_redirect_uri", "redirect_uris: each entry must be a URI without spaces.")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise RegistrationError("invalid_redirect_uri", f"redirect_uris: {uri!r} is not a valid URI.") from None
    if "#" in uri or "@" in parts.netloc or not parts.hostname:
        raise RegistrationError(
            "invalid_redirect_uri", f"redirect_uris: {uri!r} must be absolute, without fragment or userinfo."
        )
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and is_loopback_host(parts.hostname):
        return
    raise RegistrationError(
        "invalid_redirect_uri", f"redirect_uris: {uri!r} must use https, or http on a loopback host."
    )


def validate_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """Check the members we act on and return the accepted metadata to store and echo.

    :raises RegistrationError: naming the offending field.
    """
    redirect_uris = data.get("redirect_uris", [])
    if not isinstance(redirect_uris, list):
        raise RegistrationError("invalid_redirect_uri", "redirect_uris must be an array of URIs.")
    for uri in redirect_uris:
        validate_redirect_uri(uri)
    method = data.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise RegistrationError(
            "invalid_client_metadata",
            f"token_endpoint_auth_method: {method!r} is not supported; use one of {', '.join(AUTH_METHODS)}.",
        )
    accepted: dict[str, Any] = {"token_endpoint_auth_method": method}
    for name in ECHOED_STRING_FIELDS:
        if name in data and data[name] is not None:
            if not isinstance(data[name], str):
                raise RegistrationError("invalid_client_metadata", f"{name} must be a string.")
            accepted[name] = data[name]
    for name in URI_FIELDS:
        if name in accepted and urlsplit(accepted[name]).scheme != "https":
            raise RegistrationError("invalid_client_metadata", f"{name} must be an https URL.")
    if "scope" in accepted:
        unknown = sorted(set(accepted["scope"].split()) - set(oauth2_settings.SCOPES))
        if unknown:
            raise RegistrationError("invalid_client_metadata", f"scope: unknown scope(s) {' '.join(unknown)}.")
    if "contacts" in data:
        contacts = data["contacts"]
        if not isinstance(contacts, list) or not all(isinstance(c, str) for c in contacts):
            raise RegistrationError("invalid_client_metadata", "contacts must be an array of strings.")
        accepted["contacts"] = contacts
    grant_types = data.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types):
        raise RegistrationError("invalid_client_metadata", "grant_types must be an array of strings.")
    refused = sorted(set(grant_types) - set(GRANT_TYPES))
    if refused:
        raise RegistrationError(
            "invalid_client_metadata",
            f"grant_types: {', '.join(refused)} not supported; use {', '.join(GRANT_TYPES)}.",
        )
    if "response_types" in data:
        if data["response_types"] != ["code"]:
            raise RegistrationError("invalid_client_metadata", 'response_types: only ["code"] is supported.')
        accepted["response_types"] = ["code"]
    return accepted


class AnonymousPublicClientPermission:
    """DCR permission: anyone may register a public client (``token_endpoint_auth_method: none``).

    Confidential registrations need a logged-in user (DOT's ``IsAuthenticatedDCRPermission``)
    unless ``MCP_OAUTH["DCR_ALLOW_ANONYMOUS_CONFIDENTIAL"]`` is true.
    """

    def has_permission(self, request: HttpRequest) -> bool:
        try:
            data = parse_body(request)
        except RegistrationError:
            return True  # the view answers invalid_client_metadata
        if data.get("token_endpoint_auth_method") == "none":
            return True
        if mcp_oauth_settings.DCR_ALLOW_ANONYMOUS_CONFIDENTIAL:
            return True
        return IsAuthenticatedDCRPermission().has_permission(request)


class MCPRegistrationView(DynamicClientRegistrationView):
    """``POST /oauth/register`` (RFC 7591 §3); see the module docstring."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            accepted = validate_metadata(parse_body(request))
        except RegistrationError as exc:
            return _error(exc.error, exc.description)
        for permission_class in oauth2_settings.DCR_REGISTRATION_PERMISSION_CLASSES or ():
            if not permission_class().has_permission(request):
                return _error(
                    "access_denied",
                    "Anonymous registration is open to public clients only "
                    '(token_endpoint_auth_method "none"); log in to register a confidential client.',
                    status=401,
                )
        with transaction.atomic():
            response = super().post(request, *args, **kwargs)
            if response.status_code != 201:
                response["Cache-Control"] = "no-store"
                return response
            body = json.loads(response.content)
            application = get_application_model().objects.get(client_id=body["client_id"])
            profile = ClientProfile.objects.create(
                application=application,
                metadata=accepted,
                client_uri=accepted.get("client_uri", ""),
                logo_uri=accepted.get("logo_uri", ""),
            )
        body.update(accepted)
        body["client_id_issued_at"] = int(application.created.timestamp())
        if "client_secret" in body:
            body["client_secret_expires_at"] = profile.client_secret_expires_at
        result = JsonResponse(body, status=201)
        result["Cache-Control"] = "no-store"
        result["Pragma"] = "no-cache"
        return result
