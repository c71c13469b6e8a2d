"""The authorization page's organization part: which organization the request acts for, and that
organization's decision on the client.

Mixed into the authorization view (:class:`~mcp_oauth.authorization_server.pages.authorize.MCPAuthorizationView`):

* a **per-organization endpoint** (the resource's ``organization``): the user must be a member
  (else an error page, 403, no code); the organization's decision is taken before the consent
  page is shown (a refusal replaces it; a client that needs approval gets the consent page with
  a notice, so that only the user's answer, a POST, files the request) and again when it is answered;
* a **shared endpoint**: the consent page offers the user's organizations as a radio list
  (none when they have none); the answer's choice must be one of them (else a 400 page, never a
  grant), then the chosen organization's decision is taken;
* a decision other than ``approved``
  (:meth:`~mcp_oauth.adapter.DefaultMCPAdapter.organization_client_decision`) shows the page of
  ``MCP_OAUTH["ORGANIZATION_CLIENT_TEMPLATE"]`` (403, the consent page's security headers, no
  redirect, no code): ``pending`` records a pending
  :class:`~mcp_oauth.models.OrganizationClient` row requested by the user and says an admin of the
  organization must approve the client; ``denied`` / ``refused`` say it was refused. Audited
  (``organization.client_requested`` / ``organization.client_refused``).

The chosen organization is passed to the authorization code (``mcp_organization_id``, stored by
the request validator) and to the :class:`~mcp_oauth.models.Consent`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpResponse
from django.template.response import TemplateResponse
from oauth2_provider.exceptions import OAuthToolkitError
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from mcp_oauth.authorization_server.organizations import policy
from mcp_oauth.authorization_server.organizations.choice import (
    InvalidOrganizationChoice,
    chosen_organization,
    is_member,
    resource_organization,
    user_organizations,
)
from mcp_oauth.settings import mcp_oauth_settings

if TYPE_CHECKING:
    from oauth2_provider.views import AuthorizationView as _MixinBase
else:
    _MixinBase = object

#: The form field of the consent page's organization choice.
FIELD = "organization"


class GateResponse(OAuthToolkitError):
    """Raised out of DOT's own approval without the consent page (``skip_authorization``) to answer
    with ``response`` instead: the organization's page, or the consent page to choose one."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__(error=CustomOAuth2Error(error="access_denied"))
        self.response = response


class OrganizationGateMixin(_MixinBase):
    """See the module docstring. Sets ``self.mcp_organization`` (an Organization or None)."""

    mcp_organization: Any = None
    #: Whether this request's organization was decided (consent page shown, or its answer checked).
    mcp_gate_checked: bool = False

    def _refusal_page(self, error: str, description: str, status: int) -> HttpResponse:
        return self.render_to_response(
            {"error": CustomOAuth2Error(error=error, description=description)}, status=status
        )

    def organization_page(self, organization, application, decision: policy.ClientDecision) -> HttpResponse:
        """The page a member sees for a decision other than ``approved`` (403); records the pending
        request and the audit event."""
        requested = False
        if decision.outcome == policy.PENDING:
            _row, requested = policy.request_approval(organization, application, self.request.user)
        policy.record_decision(
            decision,
            request=self.request,
            organization=organization,
            application=application,
            stage="authorization",
            requested=requested,
        )
        context = {
            "organization": organization,
            "client": mcp_oauth_settings.adapter.describe_client(application),
            "outcome": decision.outcome,
            "message": decision.message,
        }
        return TemplateResponse(self.request, mcp_oauth_settings.ORGANIZATION_CLIENT_TEMPLATE, context, status=403)

    def _decided(self, organization, application) -> HttpResponse | None:
        decision = mcp_oauth_settings.adapter.organization_client_decision(self.request, organization, application)
        if decision.allowed:
            return None
        return self.organization_page(organization, application, decision)

    def _endpoint_organization(self, resource) -> tuple[Any, HttpResponse | None]:
        """The per-organization endpoint's organization (None: a shared endpoint), or the refusal
        page of a user who is not one of its members."""
        organization = resource_organization(resource)
        if organization is None:
            return None, None
        if not is_member(self.request.user, organization):
            return organization, self._refusal_page(
                "access_denied",
                f"You are not a member of {organization}: applications cannot act for it on your behalf. "
                "Ask an administrator of the organization to add you.",
                403,
            )
        return organization, None

    def organization_consent_context(self, application, resource) -> tuple[dict[str, Any], HttpResponse | None]:
        """What the consent page shows of organizations (``organization``: the endpoint's;
        ``organization_pending``: why it needs an admin's approval; ``organization_choices``: the
        user's, for a shared endpoint), or the page that replaces it."""
        self.mcp_gate_checked = True
        organization, refusal = self._endpoint_organization(resource)
        if refusal is not None:
            return {}, refusal
        if organization is not None:
            self.mcp_organization = organization
            extra: dict[str, Any] = {"organization": organization, "organization_choices": []}
            decision = mcp_oauth_settings.adapter.organization_client_decision(self.request, organization, application)
            if decision.outcome == policy.PENDING:
                # Asked on the answer only (a POST bound to this page): a link alone files no request.
                extra["organization_pending"] = decision.message
                return extra, None
            return extra, None if decision.allowed else self.organization_page(organization, application, decision)
        choices = user_organizations(self.request.user)
        return {"organization": None, "organization_choices": choices}, None

    def organization_of_answer(self, application, resource) -> HttpResponse | None:
        """Decide the organization of an approving answer (``self.mcp_organization``), or the page
        that refuses it: not a member (403), a choice that is not the user's (400), the
        organization's decision (403)."""
        self.mcp_gate_checked = True
        organization, refusal = self._endpoint_organization(resource)
        if refusal is not None:
            return refusal
        if organization is None:
            try:
                organization = chosen_organization(self.request.user, self.request.POST.getlist(FIELD))
            except InvalidOrganizationChoice as exc:
                return self._refusal_page("invalid_request", f"{exc} Nothing was authorized.", 400)
        self.mcp_organization = organization
        if organization is None:
            return None
        return self._decided(organization, application)

    def _automatic_approval_gate(self) -> HttpResponse | None:
        """DOT approves a ``skip_authorization`` client without rendering the consent page: decide the
        organization here (the endpoint's, its refusal or decision page), or show the consent page
        when the user has organizations to choose from."""
        data = getattr(self, "oauth2_data", None) or {}
        application = data.get("application")
        if application is None or not self.request.user.is_authenticated:
            return None
        extra, refusal = self.organization_consent_context(application, getattr(self, "mcp_resource", None))
        if refusal is not None:
            return refusal
        if extra.get("organization_choices") or extra.get("organization_pending"):
            return self.render_to_response(self.get_context_data(**data))
        return None

    def create_authorization_response(self, request, scopes, credentials, allow):
        """DOT's, with the chosen organization handed to the validator's ``save_authorization_code``.

        :raises GateResponse: an automatic approval the organization part stops (see :meth:`_automatic_approval_gate`).
        """
        if allow and request.method == "GET" and not self.mcp_gate_checked:
            response = self._automatic_approval_gate()
            if response is not None:
                raise GateResponse(response)
        # Always set: oauthlib's request also answers attribute lookups from the query string, so a
        # "mcp_organization_id" parameter must never be what the validator reads.
        organization_id = self.mcp_organization.pk if allow and self.mcp_organization is not None else None
        credentials = {**credentials, "mcp_organization_id": organization_id}
        return super().create_authorization_response(request, scopes, credentials, allow)
