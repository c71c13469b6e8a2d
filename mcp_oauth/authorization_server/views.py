"""Authorization, token and revocation endpoints: DOT's views with the MCP profile's gaps filled.

* PKCE: a missing ``code_challenge``, a missing ``code_challenge_method`` or
  any method but ``S256`` is refused before the consent page (OAuth 2.1 §4.1.1,
  RFC 9700 §2.1.1; MCP 2025-11-25 "Authorization Code Protection").
* Resource: only registered resources, canonicalised; none means the default
  resource (RFC 8707 §2, MCP "Resource Parameter Implementation").
* RFC 9207 ``iss`` on error redirects too, not only on success.
* Consent page: client, client_id host, redirect host, loopback warning,
  scopes and resource; not frameable, no referrer (RFC 9700 §4.16, §4.2.4).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from oauthlib.oauth2.rfc6749 import errors as oauth_errors
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.views import AuthorizationView, IntrospectTokenView, RevokeTokenView, TokenView
from oauth2_provider.views.mixins import OAuthLibMixin

from ..models import ProtectedResource
from ..settings import mcp_oauth_settings
from .resources import InvalidTarget, select_resource

UI_SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'; form-action 'self' http: https:",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def is_loopback_host(host: str | None) -> bool:
    """``localhost`` or a loopback IP literal (RFC 8252 §7.3, §8.3)."""
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def describe_client(application) -> dict:
    """What the consent page says about a client (MCP "Client ID Metadata Documents" security, CIMD §8.5).

    Returns ``{"name", "client_id_host", "registration_source", "redirect_hosts", "all_loopback"}``.
    """
    redirect_uris = application.redirect_uris.split()
    hosts = [urlsplit(uri).hostname or uri for uri in redirect_uris]
    client_id_host = None
    if application.client_id.startswith("https://"):
        client_id_host = urlsplit(application.client_id).hostname
    return {
        "name": application.name or application.client_id,
        "client_id_host": client_id_host,
        "registration_source": application.registration_source,
        "redirect_hosts": list(dict.fromkeys(hosts)),
        "all_loopback": bool(redirect_uris) and all(is_loopback_host(urlsplit(u).hostname) for u in redirect_uris),
    }


def _request_error(description: str, credentials: dict, error_class=oauth_errors.InvalidRequestError):
    return OAuthToolkitError(
        error=error_class(description=description, state=credentials.get("state")),
        redirect_uri=credentials.get("redirect_uri"),
    )


def _target_error(description: str, credentials: dict) -> OAuthToolkitError:
    return OAuthToolkitError(
        error=oauth_errors.CustomOAuth2Error(
            error="invalid_target", description=description, state=credentials.get("state")
        ),
        redirect_uri=credentials.get("redirect_uri"),
    )


def check_pkce(params, credentials: dict) -> None:
    """Refuse anything but exactly one ``code_challenge`` with ``code_challenge_method=S256``.

    :raises OAuthToolkitError: ``invalid_request`` (redirected to the validated redirect URI).
    """
    for name in ("code_challenge", "code_challenge_method"):
        if len(params.getlist(name)) > 1:
            raise _request_error(f"Duplicate {name} parameter.", credentials)
    if not params.get("code_challenge"):
        raise _request_error("code_challenge is required (PKCE with S256).", credentials)
    method = params.get("code_challenge_method")
    if not method:
        raise _request_error("code_challenge_method is required and must be S256.", credentials)
    if method != "S256":
        raise _request_error("code_challenge_method must be S256.", credentials)


@method_decorator(never_cache, name="dispatch")
class MCPAuthorizationView(AuthorizationView):
    """RFC 6749 §4.1.1 authorization endpoint of the MCP profile (see the module docstring)."""

    def get_template_names(self) -> list[str]:
        return [mcp_oauth_settings.CONSENT_TEMPLATE]

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = super().dispatch(request, *args, **kwargs)
        for header, value in UI_SECURITY_HEADERS.items():
            response[header] = value
        return response

    def validate_authorization_request(self, request: HttpRequest):
        scopes, credentials = super().validate_authorization_request(request)
        # The client and redirect URI are validated now, so errors may be redirected.
        check_pkce(request.GET, credentials)
        try:
            resource = select_resource(request.GET.getlist("resource"))
        except InvalidTarget as exc:
            raise _target_error(str(exc), credentials) from None
        request.GET = request.GET.copy()
        request.GET.setlist("resource", [resource.uri])
        self.mcp_resource = resource
        return scopes, credentials

    def form_valid(self, form):
        credentials = {
            "state": form.cleaned_data.get("state"),
            "redirect_uri": form.cleaned_data.get("redirect_uri"),
        }
        from oauth2_provider.models import get_application_model

        application = get_application_model().objects.filter(client_id=form.cleaned_data.get("client_id")).first()
        try:
            if not application or not application.redirect_uri_allowed(credentials["redirect_uri"] or ""):
                raise OAuthToolkitError(error=oauth_errors.InvalidClientIdError())
            # The hidden fields can be tampered with: check PKCE and resource again.
            data = form.data.copy()
            if form.cleaned_data.get("allow"):
                check_pkce(data, credentials)
            try:
                resource = select_resource(form.cleaned_data.get("resource", "").split())
            except InvalidTarget as exc:
                raise _target_error(str(exc), credentials) from None
        except OAuthToolkitError as error:
            if isinstance(error.oauthlib_error, oauth_errors.FatalClientError):
                return self.render_to_response({"error": error.oauthlib_error}, status=400)
            return self.error_response(error, application)
        form.cleaned_data["resource"] = resource.uri
        return super().form_valid(form)

    def error_response(self, error, application, **kwargs):
        redirect, response = OAuthLibMixin.error_response(self, error, **kwargs)
        if redirect:
            url = _add_iss_to_redirect(response["url"], mcp_oauth_settings.issuer)
            return self.redirect(url, application)
        return self.render_to_response(response, status=response["error"].status_code)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        application = kwargs.get("application")
        if application is not None:
            context["client"] = describe_client(application)
        resource = getattr(self, "mcp_resource", None)
        if resource is None and kwargs.get("resource"):
            resource = ProtectedResource.objects.filter(uri=kwargs["resource"]).first()
        context["protected_resource"] = resource
        context["redirect_host"] = urlsplit(kwargs.get("redirect_uri") or "").hostname
        context["scope_items"] = list(zip(kwargs.get("scopes", []), kwargs.get("scopes_descriptions", [])))
        return context


def _no_store(response: HttpResponse) -> HttpResponse:
    """``Cache-Control: no-store`` (OAuth 2.1 §3.2.3); JSON bodies labelled as JSON (oauthlib omits it on some errors)."""
    if response.content[:1] == b"{" and not response.get("Content-Type", "").startswith("application/json"):
        response["Content-Type"] = "application/json"
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    return response


class MCPTokenView(TokenView):
    """RFC 6749 §3.2 token endpoint; every answer, error or not, is ``Cache-Control: no-store`` (OAuth 2.1 §3.2.3)."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.POST.get("grant_type") == "urn:ietf:params:oauth:grant-type:device_code" and not request.POST.get(
            "device_code"
        ):
            from django.http import JsonResponse

            return _no_store(JsonResponse({"error": "invalid_request", "error_description": "device_code is required"}, status=400))
        return _no_store(super().post(request, *args, **kwargs))


class MCPRevokeTokenView(RevokeTokenView):
    """RFC 7009 revocation endpoint."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return _no_store(super().post(request, *args, **kwargs))


class MCPIntrospectTokenView(IntrospectTokenView):
    """RFC 7662 introspection endpoint (for resource servers deployed apart from this AS)."""
