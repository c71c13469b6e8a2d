"""The authorization endpoint and its consent page: DOT's ``AuthorizationView`` with the MCP profile's gaps filled.

* PKCE: a missing ``code_challenge``, a missing ``code_challenge_method`` or
  any method but ``S256`` is refused before the consent page (OAuth 2.1 §4.1.1,
  RFC 9700 §2.1.1; MCP 2025-11-25 "Authorization Code Protection").
* Resource: only registered resources, canonicalised; none means the default
  resource (RFC 8707 §2, MCP "Resource Parameter Implementation").
* RFC 9207 ``iss`` on error redirects too, not only on success.
* Consent page: client, client_id host, redirect host, loopback warning, trust
  verdict, scopes and resource; not frameable, no referrer to other sites (RFC 9700 §4.16, §4.2.4).
* Trust policy (:mod:`mcp_oauth.authorization_server.client_registry.trust`): a client that is denied or held for review
  gets an error page (``access_denied``, 403), never a redirect; the token endpoint
  refuses its grants in the validator.
* Organizations (:mod:`.organization_gate`): a per-organization endpoint's membership and the
  organization's decision on the client, or the choice among the user's organizations on a shared
  endpoint; a pending client gets a page saying an admin of the organization must approve it.
* Audit (:mod:`mcp_oauth.audit`): consent granted / denied, invalid ``resource``,
  trust-policy refusals. Throttling (:mod:`mcp_oauth.shared.throttling`): scope ``authorize``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.exceptions import FatalClientError, OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.oauth2_backends import _add_iss_to_redirect
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView
from oauth2_provider.views.mixins import OAuthLibMixin
from oauthlib.oauth2.rfc6749 import errors as oauth_errors

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.authorization_server.pages.consent import ConsentTransactionMixin
from mcp_oauth.authorization_server.pages.login import login_url
from mcp_oauth.authorization_server.pages.organization_gate import GateResponse, OrganizationGateMixin
from mcp_oauth.authorization_server.token_endpoint.guards import RESERVED_PREFIXES
from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.authorization_server.tokens.session_limits import consent_lapsed
from mcp_oauth.models import AuditEvent, Consent, ProtectedResource
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import throttling
from mcp_oauth.shared.ui_headers import secure_ui


def describe_client(application, verdict: trust.Verdict | None = None) -> dict:
    """What the consent page says about a client: :meth:`mcp_oauth.adapter.DefaultMCPAdapter.describe_client`."""
    return mcp_oauth_settings.adapter.describe_client(application, verdict)


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


def check_reserved(params, credentials: dict) -> None:
    """Refuse a parameter named like the request validator's own state on oauthlib's request (``_…``,
    ``mcp_…``: :data:`~mcp_oauth.authorization_server.token_endpoint.guards.RESERVED_PREFIXES`), which
    answers attribute lookups from the query string.

    :raises OAuthToolkitError: ``invalid_request`` (redirected to the validated redirect URI).
    """
    if any(key.startswith(RESERVED_PREFIXES) for key in params):
        raise _request_error("A parameter name is reserved by this server.", credentials)


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
class MCPAuthorizationView(OrganizationGateMixin, ConsentTransactionMixin, AuthorizationView):
    """RFC 6749 §4.1.1 authorization endpoint of the MCP profile (see the module docstring)."""

    def get_template_names(self) -> list[str]:
        return [mcp_oauth_settings.CONSENT_TEMPLATE]

    def get_login_url(self) -> str:
        """The site's login page, or the app's own when the site has none (:func:`mcp_oauth.authorization_server.pages.login.login_url`)."""
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
        """Apply the trust policy (:mod:`mcp_oauth.authorization_server.client_registry.trust`) to the client of this authorization request.

        Evaluates the stored ``application`` when given, else the CIMD ``client_id`` URL alone (a
        client not fetched yet: a denied host is refused before DOT fetches anything). Returns the
        verdict, or None when there is nothing to evaluate (no application and not a CIMD URL:
        DOT answers ``invalid_client``).

        :raises FatalClientError: ``access_denied`` (HTTP 403, error page, no redirect) when the
            client is denied or held for review; a ``trust.denied`` audit event is written.
        """
        if application is not None:
            verdict = mcp_oauth_settings.adapter.trust_verdict(application)
            client_id = application.client_id
        elif oauth2_settings.CIMD_ENABLED and is_cimd_client_id(client_id):
            verdict = mcp_oauth_settings.adapter.trust_verdict(client_id=client_id, registration_source=trust.CIMD)
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
        check_reserved(request.GET, credentials)
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
            check_reserved(self.request.GET, credentials)
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
        if form.cleaned_data.get("allow"):
            # Which organization the approval acts for, and its decision on the client (.organization_gate).
            refusal = self.organization_of_answer(application, resource)
            if refusal is not None:
                return refusal
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
        organization = self.mcp_organization if allow else None
        if organization is not None:
            detail["organization"] = organization.slug
        if allow and "code" in query:
            if automatic:
                detail["automatic"] = True
            Consent.record_grant(self.request.user, application, scopes.split(), resource, organization)
            record(
                AuditEvent.Kind.CONSENT_GRANTED,
                request=self.request,
                client_id=application.client_id,
                detail=detail,
                organization=organization,
            )
        elif not allow and query.get("error") == ["access_denied"]:
            record(AuditEvent.Kind.CONSENT_DENIED, request=self.request, client_id=application.client_id, detail=detail)

    def error_response(self, error, application, **kwargs):
        if isinstance(error, GateResponse):  # the organization part answers instead (.organization_gate)
            return error.response
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
        consent_page = (
            self.request.method == "GET"
            and application is not None
            and "form" in context
            and self.request.user.is_authenticated
        )
        if consent_page:
            # The organization part (.organization_gate): the endpoint's organization and its
            # decision, or the user's organizations to choose from.
            extra, refusal = self.organization_consent_context(application, getattr(self, "mcp_resource", None))
            if refusal is not None:
                return refusal
            context.update(extra)
        if (
            consent_page
            and credentials
            # On a shared endpoint, a user with organizations chooses one on the page; a client
            # that needs an organization admin's approval is asked for by the user's answer.
            and not context.get("organization_choices")
            and not context.get("organization_pending")
            and mcp_oauth_settings.adapter.can_skip_consent(
                self.request,
                application,
                list(context.get("scopes") or []),
                getattr(getattr(self, "mcp_resource", None), "uri", None),
            )
            # A remembered consent older than the client's session cap is asked again (.tokens.session_limits).
            and not consent_lapsed(self.request.user, application)
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
