"""Authorization, token and revocation endpoints: DOT's views with the MCP profile's gaps filled.

* PKCE: a missing ``code_challenge``, a missing ``code_challenge_method`` or
  any method but ``S256`` is refused before the consent page (OAuth 2.1 §4.1.1,
  RFC 9700 §2.1.1; MCP 2025-11-25 "Authorization Code Protection").
* Resource: only registered resources, canonicalised; none means the default
  resource (RFC 8707 §2, MCP "Resource Parameter Implementation").
* RFC 9207 ``iss`` on error redirects too, not only on success.
* Consent page: client, client_id host, redirect host, loopback warning, trust
  verdict, scopes and resource; not frameable, no referrer to other sites (RFC 9700 §4.16, §4.2.4).
* Trust policy (:mod:`mcp_oauth.authorization_server.trust`): a client that is denied or held for review
  gets an error page (``access_denied``, 403), never a redirect; the token endpoint
  refuses its grants in the validator.
* Audit (:mod:`mcp_oauth.audit`): consent granted / denied, invalid ``resource``,
  trust-policy refusals.
* Throttling (:mod:`mcp_oauth.shared.throttling`): scopes ``authorize`` and ``token``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.signals import app_authorized
from oauth2_provider.views import AuthorizationView, IntrospectTokenView, RevokeTokenView, TokenView
from oauth2_provider.views.mixins import OAuthLibMixin
from oauthlib.common import Request as OauthlibRequest
from oauthlib.oauth2.rfc6749 import errors as oauth_errors

from mcp_oauth.adapter import get_adapter
from mcp_oauth.audit import record
from mcp_oauth.authorization_server import trust
from mcp_oauth.authorization_server.clients import token_request
from mcp_oauth.authorization_server.consent import ConsentTransactionMixin
from mcp_oauth.authorization_server.dpop_token_endpoint import token_request_proof
from mcp_oauth.authorization_server.login import login_url
from mcp_oauth.authorization_server.redeemed import SlotUnavailable, known_replay, redemption_slot
from mcp_oauth.authorization_server.resource_selection import InvalidTarget, select_resource
from mcp_oauth.dpop.introspection import with_confirmation
from mcp_oauth.errors import OAuthError
from mcp_oauth.models import AuditEvent, Consent, ProtectedResource
from mcp_oauth.observability.metrics import observe_token_response
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import throttling
from mcp_oauth.shared.overload import unavailable_response
from mcp_oauth.shared.ui_headers import secure_ui


def describe_client(application, verdict: trust.Verdict | None = None) -> dict:
    """What the consent page says about a client: :meth:`mcp_oauth.adapter.DefaultMCPAdapter.describe_client`."""
    return get_adapter().describe_client(application, verdict)


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


def _record_invalid_resource(request: HttpRequest, client_id: str, values, description: str) -> None:
    record(
        AuditEvent.Kind.INVALID_RESOURCE,
        request=request,
        client_id=client_id or "",
        detail={"endpoint": "authorization", "resource": list(values), "description": description},
    )


def _untrusted(verdict: trust.Verdict) -> FatalClientError:
    """The error page a client that is not allowed gets (``access_denied``, 403; never redirected)."""
    return FatalClientError(error=trust.UntrustedClientAuthorizationError(description=verdict.user_message))


CODE_CHALLENGE_RE = re.compile(r"^[A-Za-z0-9\-._~]{43,128}\Z")


def check_pkce(params, credentials: dict) -> None:
    """Refuse anything but exactly one ``code_challenge`` with ``code_challenge_method=S256``.

    :raises OAuthToolkitError: ``invalid_request`` (redirected to the validated redirect URI).
    """
    for name in ("code_challenge", "code_challenge_method"):
        if len(params.getlist(name)) > 1:
            raise _request_error(f"Duplicate {name} parameter.", credentials)
    if not params.get("code_challenge"):
        raise _request_error("code_challenge is required (PKCE with S256).", credentials)
    if not CODE_CHALLENGE_RE.match(params.get("code_challenge")):
        raise _request_error(
            "code_challenge must be 43-128 characters of [A-Za-z0-9-._~] (RFC 7636 §4.2).", credentials
        )
    method = params.get("code_challenge_method")
    if not method:
        raise _request_error("code_challenge_method is required and must be S256.", credentials)
    if method != "S256":
        raise _request_error("code_challenge_method must be S256.", credentials)


def check_state(state: str | None, credentials: dict) -> None:
    """Refuse a ``state`` longer than ``MCP_OAUTH["AUTHORIZATION_STATE_MAX_LENGTH"]`` characters
    (default 2048). RFC 6749 §4.1.1 leaves ``state`` opaque and unbounded; the server echoes it in
    the redirect (§4.1.2), so an unbounded one lets anyone make it store and send back arbitrary
    amounts of data. Real clients send 16-64 random characters, or an encoded return URL of a few
    hundred; 2048 leaves room for those and keeps the redirect URL under common 8 KB URL limits.

    :raises OAuthToolkitError: ``invalid_request`` redirected to the validated redirect URI
        (RFC 6749 §4.1.2.1), without the refused ``state``.
    """
    limit = mcp_oauth_settings.AUTHORIZATION_STATE_MAX_LENGTH
    if limit is not None and state is not None and len(state) > limit:
        raise _request_error(f"state is longer than {limit} characters.", {**credentials, "state": None})


@method_decorator(never_cache, name="dispatch")
class MCPAuthorizationView(ConsentTransactionMixin, AuthorizationView):
    """RFC 6749 §4.1.1 authorization endpoint of the MCP profile (see the module docstring)."""

    def get_template_names(self) -> list[str]:
        return [mcp_oauth_settings.CONSENT_TEMPLATE]

    def get_login_url(self) -> str:
        """The site's login page, or the app's own when the site has none (:func:`mcp_oauth.authorization_server.login.login_url`)."""
        return login_url()

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        return secure_ui(self.throttled_response(request) or super().dispatch(request, *args, **kwargs))

    def throttled_response(self, request: HttpRequest) -> HttpResponse | None:
        """429 ``temporarily_unavailable`` when the caller is over the ``authorize`` rate (see :mod:`mcp_oauth.shared.throttling`).

        A browser (``Accept: text/html``) gets the error page, other callers JSON; both carry
        ``Retry-After``. Never a redirect: the request has not been validated.
        """
        retry_after = throttling.check(request, "authorize")
        if retry_after is None:
            return None
        if "text/html" not in request.META.get("HTTP_ACCEPT", ""):
            return throttling.throttle_error(retry_after, "temporarily_unavailable").response()
        error = {
            "error": "temporarily_unavailable",
            "description": "Too many requests. Please wait a moment and try again.",
        }
        response = TemplateResponse(request, self.get_template_names(), {"error": error}, status=429)
        response["Retry-After"] = str(retry_after)
        return response

    def check_trust(self, request: HttpRequest, application=None, client_id: str = "") -> trust.Verdict | None:
        """Apply the trust policy (:mod:`mcp_oauth.authorization_server.trust`) to the client of this authorization request.

        Evaluates the stored ``application`` when given, else the CIMD ``client_id`` URL alone (a
        client not fetched yet: a denied host is refused before DOT fetches anything). Returns the
        verdict, or None when there is nothing to evaluate (no application and not a CIMD URL:
        DOT answers ``invalid_client``).

        :raises FatalClientError: ``access_denied`` (HTTP 403, error page, no redirect) when the
            client is denied or held for review; a ``trust.denied`` audit event is written.
        """
        if application is not None:
            verdict = get_adapter().trust_verdict(application)
            client_id = application.client_id
        elif oauth2_settings.CIMD_ENABLED and is_cimd_client_id(client_id):
            verdict = get_adapter().trust_verdict(client_id=client_id, registration_source=trust.CIMD)
        else:
            return None
        if not verdict.allowed:
            trust.record_denial(verdict, request=request, client_id=client_id, stage="authorization")
            raise _untrusted(verdict)
        return verdict

    def validate_authorization_request(self, request: HttpRequest):
        Application = get_application_model()
        client_ids = request.GET.getlist("client_id")
        client_id = client_ids[0] if len(client_ids) == 1 else ""
        try:
            application = Application.objects.filter(client_id=client_id).first() if client_id else None
        except ValueError:  # a client_id the database cannot represent: DOT refuses it
            application = None
        verdict = self.check_trust(request, application=application, client_id=client_id)
        scopes, credentials = super().validate_authorization_request(request)
        self.mcp_credentials = credentials
        if application is None:
            # First sight of a CIMD client: DOT has just fetched and stored it; judge it whole
            # (its redirect hosts are known now).
            application = Application.objects.filter(client_id=credentials.get("client_id")).first()
            verdict = self.check_trust(request, application=application) if application is not None else verdict
        self.mcp_trust = verdict
        # The client and redirect URI are validated now, so errors may be redirected.
        check_state(request.GET.get("state"), credentials)
        check_pkce(request.GET, credentials)
        try:
            resource = select_resource(request.GET.getlist("resource"))
        except InvalidTarget as exc:
            _record_invalid_resource(request, credentials.get("client_id"), request.GET.getlist("resource"), str(exc))
            raise _target_error(str(exc), credentials) from None
        params = request.GET.copy()
        params.setlist("resource", [resource.uri])
        request.GET = params  # type: ignore[assignment]  # the canonical resource for DOT's validation
        self.mcp_resource = resource
        return scopes, credentials

    def form_valid(self, form):
        credentials = {
            "state": form.cleaned_data.get("state"),
            "redirect_uri": form.cleaned_data.get("redirect_uri"),
        }

        application = get_application_model().objects.filter(client_id=form.cleaned_data.get("client_id")).first()
        try:
            if not application or not application.redirect_uri_allowed(credentials["redirect_uri"] or ""):
                raise OAuthToolkitError(error=oauth_errors.InvalidClientIdError())
            # The policy may have changed since the page was shown: even "Cancel" must not redirect.
            self.check_trust(self.request, application=application)
            # The hidden fields can be tampered with: check state, PKCE and resource again.
            check_state(credentials["state"], credentials)
            data = form.data.copy()
            if form.cleaned_data.get("allow"):
                check_pkce(data, credentials)
            try:
                resource = select_resource(form.cleaned_data.get("resource", "").split())
            except InvalidTarget as exc:
                _record_invalid_resource(
                    self.request, application.client_id, form.cleaned_data.get("resource", "").split(), str(exc)
                )
                raise _target_error(str(exc), credentials) from None
        except OAuthToolkitError as error:
            if isinstance(error.oauthlib_error, oauth_errors.FatalClientError):
                return self.render_to_response(
                    {"error": error.oauthlib_error}, status=error.oauthlib_error.status_code or 400
                )
            return self.error_response(error, application)
        form.cleaned_data["resource"] = resource.uri
        response = super().form_valid(form)
        self._record_consent(
            application,
            response,
            allow=bool(form.cleaned_data.get("allow")),
            scopes=form.cleaned_data.get("scope") or "",
            resource=resource.uri,
        )
        return response

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        if response.status_code in (301, 302, 303) and request.user.is_authenticated:
            # Approved without the consent page (an application with skip_authorization).
            application = get_application_model().objects.filter(client_id=request.GET.get("client_id")).first()
            if application is not None:
                self._record_consent(
                    application,
                    response,
                    allow=True,
                    scopes=request.GET.get("scope") or "",
                    resource=getattr(getattr(self, "mcp_resource", None), "uri", None),
                    automatic=True,
                )
        return response

    def _record_consent(
        self, application, response, *, allow: bool, scopes: str, resource: str | None, automatic: bool = False
    ) -> None:
        """Audit the user's answer and keep the :class:`~mcp_oauth.models.Consent` up to date.

        Only answers that reached the client count: a redirect carrying ``code`` (granted) or
        ``error=access_denied`` (declined).
        """
        location = response.get("Location") or ""
        query = parse_qs(urlsplit(location).query)
        detail: dict[str, Any] = {"scope": scopes, "resource": resource, "redirect_host": urlsplit(location).hostname}
        if allow and "code" in query:
            if automatic:
                detail["automatic"] = True
            Consent.record_grant(self.request.user, application, scopes.split(), resource)
            record(
                AuditEvent.Kind.CONSENT_GRANTED, request=self.request, client_id=application.client_id, detail=detail
            )
        elif not allow and query.get("error") == ["access_denied"]:
            record(AuditEvent.Kind.CONSENT_DENIED, request=self.request, client_id=application.client_id, detail=detail)

    def error_response(self, error, application, **kwargs):
        redirect, response = OAuthLibMixin.error_response(self, error, **kwargs)
        if redirect:
            url = _add_iss_to_redirect(response["url"], mcp_oauth_settings.issuer)
            return self.redirect(url, application)
        page = self.render_to_response(response, status=response["error"].status_code)
        retry_after = getattr(response["error"], "retry_after", None)
        if retry_after:  # temporarily_unavailable (a CIMD document that could not be fetched yet)
            page["Retry-After"] = str(retry_after)
        return page

    def render_to_response(self, context, **response_kwargs):
        """The consent page, unless the adapter approves this request without it (:meth:`can_skip_consent`)."""
        application = context.get("application") if isinstance(context, dict) else None
        credentials = getattr(self, "mcp_credentials", None)
        if (
            self.request.method == "GET"
            and application is not None
            and "form" in context
            and credentials
            and self.request.user.is_authenticated
            and get_adapter().can_skip_consent(
                self.request,
                application,
                list(context.get("scopes") or []),
                getattr(getattr(self, "mcp_resource", None), "uri", None),
            )
        ):
            try:
                uri, _headers, _body, _status = self.create_authorization_response(
                    request=self.request,
                    scopes=" ".join(context.get("scopes") or []),
                    credentials=credentials,
                    allow=True,
                )
            except OAuthToolkitError as error:
                return self.error_response(error, application)
            return self.redirect(uri, application)
        return super().render_to_response(context, **response_kwargs)

    def redirect(self, redirect_to, application):
        """DOT's redirect to the client; after the consent POST it is a 303 See Other (RFC 9700 §4.12:
        never 307, which would replay the form to the client; OAuth 2.1 §7.5.3)."""
        response = super().redirect(redirect_to, application)
        if self.request.method == "POST":
            response.status_code = 303
        return response

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        application = kwargs.get("application")
        if application is not None:
            context["client"] = describe_client(application, getattr(self, "mcp_trust", None))
        resource = getattr(self, "mcp_resource", None)
        if resource is None and kwargs.get("resource"):
            resource = ProtectedResource.objects.filter(uri=kwargs["resource"]).first()
        context["protected_resource"] = resource
        context["redirect_host"] = urlsplit(kwargs.get("redirect_uri") or "").hostname
        context["scope_items"] = list(
            zip(kwargs.get("scopes", []), kwargs.get("scopes_descriptions", []), strict=False)
        )
        return context


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
            # kept for the validator (RFC 9449 §5, mcp_oauth.authorization_server.dpop_token_endpoint)
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
            if token is None or not get_adapter().may_introspect(self.caller, token):
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
