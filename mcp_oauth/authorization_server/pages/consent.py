"""Consent transactions: the approval a user gives is bound to the request they saw.

When the consent page is shown, the validated authorization request is stored in
the user's session under a random transaction id, which is the only thing the
form carries that matters. The POST looks the transaction up (single use,
same user, at most :data:`TTL_SECONDS` old) and uses the stored request: a form
with another client, redirect URI or scope, a replayed form, or one without a
transaction is refused (MCP security best practices "Consent UI
Requirements"; RFC 9700 §4.4 / OAuth 2.1 §7.10 cross-site request forgery).
"""

from __future__ import annotations

import secrets
import time
from typing import TYPE_CHECKING, Any

from django import forms
from django.http import HttpRequest
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import get_application_model
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

SESSION_KEY = "mcp_oauth_consent"
#: Fields of the authorization request that the approval applies to.
BOUND_FIELDS = (
    "client_id",
    "redirect_uri",
    "scope",
    "state",
    "response_type",
    "code_challenge",
    "code_challenge_method",
    "nonce",
    "claims",
    "resource",
)
TTL_SECONDS = 600
MAX_PENDING = 10


class ConsentForm(AllowForm):
    """DOT's consent form plus the transaction id."""

    transaction = forms.CharField(widget=forms.HiddenInput())


def open_transaction(request: HttpRequest, initial: dict[str, Any]) -> str:
    """Store the request shown on the consent page; return its transaction id (192 random bits).

    At most :data:`MAX_PENDING` transactions are kept per session (the oldest go first).
    """
    transaction = secrets.token_urlsafe(24)
    pending = dict(request.session.get(SESSION_KEY) or {})
    pending[transaction] = {
        "user": request.user.pk,
        "created": time.time(),
        "fields": {name: initial.get(name) for name in BOUND_FIELDS},
    }
    for stale in sorted(pending, key=lambda key: pending[key]["created"])[:-MAX_PENDING]:
        pending.pop(stale)
    request.session[SESSION_KEY] = pending
    return transaction


def close_transaction(request: HttpRequest, transaction: str | None) -> dict[str, Any] | None:
    """Take the stored request of ``transaction`` (single use).

    :returns: the stored fields, or None for an unknown, used, expired or other user's transaction.
    """
    pending = dict(request.session.get(SESSION_KEY) or {})
    entry = pending.pop(transaction or "", None)
    request.session[SESSION_KEY] = pending
    if not entry or entry.get("user") != request.user.pk or time.time() - entry.get("created", 0) > TTL_SECONDS:
        return None
    return entry["fields"]


if TYPE_CHECKING:
    from oauth2_provider.views import AuthorizationView as _MixinBase
else:
    _MixinBase = object


class ConsentTransactionMixin(_MixinBase):
    """Mixed into the authorization view (before DOT's ``AuthorizationView``).

    * the consent form carries a transaction id (:func:`open_transaction`);
    * a POST is answered from the stored request (:func:`close_transaction`): unknown,
      used or expired transactions and incomplete forms get a 400 error page;
    * ``approval_prompt`` from the request is ignored: consent is asked every time
      unless an administrator marked the client ``skip_authorization`` (OAuth 2.1
      §7.3.1: no silent re-approval of public clients whose identity cannot be proven);
    * ``prompt=none`` can never be satisfied: without a login it gets an error page
      (no redirect before the user is authenticated, RFC 9700 §4.11.2), with one the
      client gets ``consent_required`` (OpenID Connect Core §3.1.2.6).
    """

    form_class = ConsentForm

    def get_initial(self):
        initial = super().get_initial()
        initial["transaction"] = open_transaction(self.request, initial)
        return initial

    def _error_page(self, error: str, description: str, status: int = 400):
        return self.render_to_response(
            {"error": CustomOAuth2Error(error=error, description=description)}, status=status
        )

    def get(self, request, *args, **kwargs):
        if "approval_prompt" in request.GET:
            request.GET = request.GET.copy()
            del request.GET["approval_prompt"]
        if "none" in request.GET.get("prompt", "").split():
            try:
                _scopes, credentials = self.validate_authorization_request(request)
            except OAuthToolkitError as error:
                return self.error_response(error, None)
            application = get_application_model().objects.get(client_id=credentials["client_id"])
            if not application.skip_authorization:
                refusal = CustomOAuth2Error(
                    error="consent_required",
                    description="This server asks the user for consent every time.",
                    state=credentials.get("state"),
                )
                return self.error_response(
                    OAuthToolkitError(error=refusal, redirect_uri=credentials["redirect_uri"]), application
                )
        return super().get(request, *args, **kwargs)

    def handle_no_permission(self):
        if "none" in self.request.GET.get("prompt", "").split():
            return self._error_page("login_required", "You are not logged in to this site.")
        return super().handle_no_permission()

    def post(self, request, *args, **kwargs):
        fields = close_transaction(request, request.POST.get("transaction"))
        if fields is None:
            return self._error_page(
                "invalid_request",
                "This consent form has expired or was already used. Start again from the application.",
            )
        data = request.POST.copy()
        for name, value in fields.items():
            data[name] = "" if value is None else value
        request.POST = data
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        return self._error_page("invalid_request", "The consent form is incomplete.")
