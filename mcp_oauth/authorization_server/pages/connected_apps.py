"""The "connected apps" page: the MCP clients the signed-in user has authorized, and revoking one.

GET lists the user's active consents (:func:`mcp_oauth.authorization_server.tokens.grants.user_grants`): name, how the
client registered, the host of a CIMD ``client_id``, scopes, resource, last token issued.
POST ``action=revoke&client_id=<id>`` revokes that client's tokens and consent (with
``organization=<pk>``, or empty for none, only the connection acting for that organization)
(:func:`mcp_oauth.authorization_server.tokens.grants.revoke_user_grants`, audited) and comes back with a message (303);
``action=revoke_all`` does it for every client; ``action=export`` downloads the user's own data
as JSON (:mod:`mcp_oauth.authorization_server.user_data.export`, GDPR Art. 15/20; a POST, so the
CSRF token guards it). An unknown action or client answers 400 with the page and a message. Login required, CSRF-protected, not frameable, never cached.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_http_methods
from oauth2_provider.models import get_application_model

from mcp_oauth.authorization_server.pages.login import login_url
from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants, user_grants
from mcp_oauth.authorization_server.user_data.export import export_response
from mcp_oauth.models import Consent
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.ui_headers import secure_ui as _secure

REASON = "revoked on the connected apps page"


def _page(request: HttpRequest, status: int = 200, error: str = "") -> HttpResponse:
    context = {"grants": user_grants(request.user), "account": request.user.get_username(), "form_error": error}
    return _secure(render(request, mcp_oauth_settings.CONNECTED_APPS_TEMPLATE, context, status=status))


@never_cache
@csrf_protect
@require_http_methods(["GET", "HEAD", "POST"])
def connected_apps(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """See the module docstring."""
    if not request.user.is_authenticated:
        return _secure(redirect_to_login(request.get_full_path(), login_url()))
    if request.method != "POST":
        return _page(request)
    action = request.POST.get("action")
    here = reverse("mcp-oauth-connected-apps")
    if action == "export":
        return _secure(export_response(request.user))
    if action == "revoke_all":
        names = list(dict.fromkeys(grant.name for grant in user_grants(request.user)))
        revoke_user_grants(request.user, None, reason=REASON)
        if names:
            messages.success(
                request,
                f"Access revoked for {len(names)} application{'s' if len(names) != 1 else ''}: {', '.join(names)}.",
            )
        return _secure(HttpResponseRedirect(here, status=303))
    if action != "revoke":
        return _page(
            request, 400, "Nothing was changed: the form did not say what to do. Use the Revoke buttons below."
        )
    client_id = request.POST.get("client_id", "")
    application = None
    if client_id and len(client_id) <= 2000 and "\x00" not in client_id:  # PostgreSQL text holds no NUL
        application = get_application_model().objects.filter(client_id=client_id).first()
    consent = None
    if application is not None:
        consents = Consent.objects.filter(user=request.user, application=application, revoked_at__isnull=True)
        value = request.POST.get("organization")
        if value is not None:  # the connection of one organization ("": the one acting for none)
            if value == "":
                consents = consents.filter(organization__isnull=True)
            elif (
                value.isascii() and value.isdigit() and len(value) <= 19 and int(value) < 2**63
            ):  # a key any database holds
                consents = consents.filter(organization_id=int(value))
            else:
                consents = consents.none()
        consent = consents.select_related("organization").first()
    if application is None or consent is None:
        return _page(request, 400, "Nothing was changed: that application is not connected to your account.")
    if "organization" in request.POST:
        count = revoke_user_grants(request.user, application, reason=REASON, organization=consent.organization)
    else:
        count = revoke_user_grants(request.user, application, reason=REASON)
    name = application.name or application.client_id
    if consent.organization is not None and "organization" in request.POST:
        name = f"{name} (for {consent.organization})"
    messages.success(
        request,
        f"{name} can no longer use your account: its access was revoked ({count} token{'s' if count != 1 else ''}). "
        "It will have to ask for your approval again.",
    )
    return _secure(HttpResponseRedirect(here, status=303))
