"""The token, revocation and introspection endpoints: DOT's views with the MCP profile's gaps filled;
the authorization endpoint and its consent page are :mod:`.pages.authorize` (re-exported here).

* Trust policy: the token endpoint refuses the grants of a denied client in the validator.
* Throttling (:mod:`mcp_oauth.shared.throttling`): scope ``token``.
* Code replay: a redeemed code presented again is answered from :mod:`.tokens.redeemed`.
* Introspection (RFC 7662): who may ask is the adapter's decision (``may_introspect``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.debug import sensitive_post_parameters
from oauth2_provider.models import get_access_token_model
from oauth2_provider.signals import app_authorized
from oauth2_provider.views import IntrospectTokenView, RevokeTokenView, TokenView
from oauthlib.common import Request as OauthlibRequest
from oauthlib.oauth2.rfc6749 import errors as oauth_errors

from mcp_oauth.authorization_server.client_registry.clients import token_request
from mcp_oauth.authorization_server.pages.authorize import (  # noqa: F401 - importable from here
    CODE_CHALLENGE_RE,
    MCPAuthorizationView,
    check_pkce,
    check_state,
    describe_client,
)
from mcp_oauth.authorization_server.token_endpoint.dpop import token_request_proof
from mcp_oauth.authorization_server.tokens.redeemed import SlotUnavailable, known_replay, redemption_slot
from mcp_oauth.dpop.introspection import with_confirmation
from mcp_oauth.errors import OAuthError
from mcp_oauth.observability.metrics import observe_token_response
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import throttling
from mcp_oauth.shared.overload import unavailable_response


def _no_store(response: HttpResponse) -> HttpResponse:
    """``Cache-Control: no-store`` (OAuth 2.1 §3.2.3); JSON bodies labelled as JSON (oauthlib omits it on some errors)."""
    if response.content[:1] == b"{" and not response.get("Content-Type", "").startswith("application/json"):
        response["Content-Type"] = "application/json"
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    return response


def _basic_realm() -> str:
    """The realm of the token endpoint's ``Basic`` challenge: the issuer (quotes dropped)."""
    try:
        return str(mcp_oauth_settings.issuer).replace('"', "").replace("\\", "")
    except Exception:  # noqa: BLE001 - BASE_URL unset: still a valid challenge
        return "oauth"


class MCPTokenView(TokenView):
    """RFC 6749 §3.2 token endpoint; every answer, error or not, is ``Cache-Control: no-store`` (OAuth 2.1 §3.2.3).

    Throttled under the ``token`` scope (429 ``slow_down`` with ``Retry-After``, see :mod:`mcp_oauth.shared.throttling`);
    tokens issued, refreshed and revoked are audited by the request validator.
    """

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = self._answer(request, *args, **kwargs)
        observe_token_response(request, response)  # metrics: grants and refusals (no-op when off)
        return response

    def _answer(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            # clients and trust rules from memory while current (.clients); the DPoP proof checked and
            # kept for the validator (RFC 9449 §5, mcp_oauth.authorization_server.token_endpoint.dpop)
            with token_request(), token_request_proof(request):
                response = self.token_response(request, *args, **kwargs)
        except OAuthError as exc:
            return exc.response()
        if response.status_code == 401:
            # RFC 6749 §5.2: a failed client authentication is invalid_client; its challenge names
            # the Basic scheme, that of client authentication here (oauthlib says Bearer, whose
            # error codes do not include invalid_client: RFC 6750 §3.1).
            try:
                body = json.loads(response.content)
            except ValueError:
                body = {}
            return OAuthError(
                body.get("error") or "invalid_client",
                body.get("error_description") or "Client authentication failed.",
                status=401,
                www_authenticate=f'Basic realm="{_basic_realm()}"',
            ).response()
        return _no_store(response)

    def token_response(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """DOT's token response, after the checks DOT and oauthlib do not make.

        :raises OAuthError: 429 ``slow_down`` (throttled), 400 ``invalid_request`` (no
            ``grant_type``), 400 ``unsupported_grant_type`` (the device grant), 400
            ``invalid_grant`` (a concurrent request consumed the code first).
        """
        throttling.enforce(request, "token")
        if not request.POST.get("grant_type"):
            raise OAuthError("invalid_request", "grant_type is required.")
        if request.POST.get("grant_type") == "urn:ietf:params:oauth:grant-type:device_code":
            # DOT routes this grant before oauthlib; the MCP profile does not offer it.
            raise OAuthError("unsupported_grant_type", "The device grant is not supported.")
        if request.POST.get("grant_type") == "authorization_code":
            # A redeemed code whose replay the database path would only refuse is answered from
            # its marker, before and again after waiting for a redemption slot (.redeemed).
            if known_replay(request.POST):
                raise OAuthError("invalid_grant", "The authorization code was already used.")
            try:
                with redemption_slot():
                    if known_replay(request.POST):
                        raise OAuthError("invalid_grant", "The authorization code was already used.")
                    return self._grant(request, *args, **kwargs)
            except SlotUnavailable:
                return unavailable_response()
        return self._grant(request, *args, **kwargs)

    @method_decorator(sensitive_post_parameters("password", "client_secret"))
    def authorization_flow_token_response(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """DOT's, without reading the issued token back when nobody listens to ``app_authorized``."""
        if app_authorized.has_listeners(self):
            return super().authorization_flow_token_response(request, *args, **kwargs)
        _url, headers, body, status = self.create_token_response(request)
        response = HttpResponse(content=body, status=status)
        for key, value in headers.items():
            response[key] = value
        return response

    def _grant(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return super().post(request, *args, **kwargs)
        except ObjectDoesNotExist:
            # A concurrent request consumed the same code or refresh token between
            # DOT's validation and its issuance (RFC 6749 §5.2: invalid_grant).
            raise OAuthError("invalid_grant", "The grant was already used.") from None


class MCPRevokeTokenView(RevokeTokenView):
    """RFC 7009 revocation endpoint."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return _no_store(super().post(request, *args, **kwargs))


class MCPIntrospectTokenView(IntrospectTokenView):
    """RFC 7662 introspection endpoint (for resource servers deployed apart from this AS); a
    DPoP-bound token is described with its ``cnf.jkt`` (RFC 9449 §6.2).

    Only the resource servers of a token's audience learn about it (RFC 7662 §4,
    :meth:`mcp_oauth.adapter.DefaultMCPAdapter.may_introspect`); any other caller, authenticated
    as a client or with a bearer token of scope ``introspection``, gets ``{"active": false}``.
    """

    #: The authenticated caller (a DOT ``Application``), set by :meth:`authenticate_client` or
    #: :meth:`verify_request`.
    caller = None

    def authenticate_client(self, request: HttpRequest) -> bool:
        """DOT's client authentication, keeping the authenticated client; a refused
        ``private_key_jwt`` assertion is a failed authentication (DOT then tries a bearer token,
        else answers 401), never an error page."""
        core = self.get_oauthlib_core()
        uri, http_method, body, headers = core._extract_params(request)
        oauthlib_request = OauthlibRequest(uri, http_method, body, headers)
        try:
            authenticated = bool(core.server.request_validator.authenticate_client(oauthlib_request))
        except oauth_errors.OAuth2Error:
            return False
        if authenticated:
            self.caller = getattr(oauthlib_request, "client", None)
        return authenticated

    def verify_request(self, request: HttpRequest):
        """DOT's bearer-token check (scope ``introspection``), keeping the token's client as the caller."""
        valid, oauthlib_request = super().verify_request(request)
        if valid:
            access_token = getattr(oauthlib_request, "access_token", None)
            self.caller = getattr(access_token, "application", None) or getattr(oauthlib_request, "client", None)
        return valid, oauthlib_request

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return self.answer(request.GET.get("token", None))

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return self.answer(request.POST.get("token", None))

    def answer(self, token_value: str | None) -> HttpResponse:
        """DOT's answer for ``token_value`` when the caller may learn about it, else ``{"active": false}``."""
        if token_value is not None:
            checksum = hashlib.sha256(token_value.encode("utf-8", "surrogatepass")).hexdigest()
            token = get_access_token_model().objects.filter(token_checksum=checksum).first()
            if token is None or not mcp_oauth_settings.adapter.may_introspect(self.caller, token):
                return JsonResponse({"active": False})
        return self.get_token_response(token_value)

    def unauthenticated_response(self, request: HttpRequest, oauthlib_request: Any = None) -> HttpResponse:
        """401 with the RFC 6749 §5.2 error in JSON (RFC 7662 §2.3), never DOT's bare 403: ``invalid_token``
        with a Bearer challenge when the caller presented a bearer token, else ``invalid_client`` with
        a Basic challenge (the scheme of client authentication here)."""
        if request.headers.get("Authorization", "")[:7].lower() == "bearer ":
            return OAuthError("invalid_token", "The access token is invalid or expired.", status=401).response()
        return OAuthError(
            "invalid_client",
            "Client authentication failed.",
            status=401,
            www_authenticate=f'Basic realm="{_basic_realm()}"',
        ).response()

    @staticmethod
    def get_token_response(token_value=None):
        return with_confirmation(IntrospectTokenView.get_token_response(token_value), token_value)
