"""The pages the user opens in a browser for URL-mode elicitation (SEP-1036), never through the MCP client.

=========================================  ==========================================================
``elicitation/<elicitation_id>/``          start page: login, identity check, interstitial; then the
                                           third party (``connect``), the secure input form
                                           (``secret``) or the site's own page (``external``)
``elicitation/callback/<provider slug>/``  the third party's redirect back: state, identity and
                                           ``iss`` checks, code exchange, connection stored
``elicitation/connections/``               the user's connections: connect, disconnect
=========================================  ==========================================================

Identity (SEP-1036 "Servers must verify user identity at the beginning and end"): the
logged-in user must be the user the elicitation was created for, on the start page and again
on the callback; a mismatch answers 403 and writes an ``identity.mismatch`` audit event, and
nothing is stored. The OAuth ``state`` lives in the user's server-side session only after the
user approved the interstitial, is single-use and expires (RFC 9700 §2.1, §4.7). Unknown,
finished or expired ids answer 404. Every page is not frameable, not cached, sends no referrer to other sites (``same-origin``).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from elicitation.crypto import encrypt, keys_configured
from elicitation.failures import describe, provider_error
from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.providers import (
    ProviderError,
    build_authorization_request,
    exchange_code,
    revoke_connection,
    store_connection,
)
from elicitation.service import finish_elicitation
from elicitation.settings import elicitation_settings
from elicitation.signals import connection_created
from mcp_oauth import audit
from mcp_oauth.authorization_server.pages.login import login_url
from mcp_oauth.models import AuditEvent
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import throttling
from mcp_oauth.shared.text import storable
from mcp_oauth.shared.ui_headers import secure_ui

logger = logging.getLogger("elicitation.views")

#: Session key of the pending third-party authorizations: ``{state: {...}}``.
SESSION_KEY = "elicitation.oauth"
#: What an ``elicitation_id`` looks like (``secrets.token_urlsafe``); anything else is unknown (404).
ELICITATION_ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: A provider slug (Django's ``SlugField``).
SLUG_RE = re.compile(r"^[-a-zA-Z0-9_]{1,50}$")
#: Most pending authorizations kept per browser session (the oldest are dropped).
MAX_PENDING = 5


class SeeOther(HttpResponseRedirect):
    """303: after a POST the browser must GET the next page (RFC 9110 §15.4.4)."""

    status_code = 303


def _page(request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
    return secure_ui(render(request, template, context, status=status))


def _error(request: HttpRequest, status: int, title: str, message: str) -> HttpResponse:
    return _page(request, elicitation_settings.ERROR_TEMPLATE, {"title": title, "message": message}, status=status)


def _done(request: HttpRequest, title: str, message: str, ok: bool = True, status: int = 200) -> HttpResponse:
    return _page(
        request, elicitation_settings.DONE_TEMPLATE, {"title": title, "message": message, "ok": ok}, status=status
    )


def _throttled(request: HttpRequest) -> HttpResponse | None:
    """429 with ``Retry-After`` when the caller is over the ``elicitation`` rate (SEP-1036: servers
    MUST rate-limit; ``MCP_OAUTH["THROTTLE_RATES"]["elicitation"]``)."""
    retry_after = throttling.check(request, "elicitation")
    if retry_after is None:
        return None
    response = _error(request, 429, "Too many requests", f"Try again in {retry_after} seconds.")
    response["Retry-After"] = str(retry_after)
    return response


def _unconfigured(request: HttpRequest) -> HttpResponse | None:
    """503 when nothing could be stored (no encryption keys; ``elicitation.W001``)."""
    if keys_configured():
        return None
    logger.error('ELICITATION["ENCRYPTION_KEYS"] is not set: URL-mode elicitation pages cannot store anything')
    return _error(request, 503, "Not available", "This site cannot store connections or secrets right now.")


def _not_found(request: HttpRequest) -> HttpResponse:
    return _error(
        request,
        404,
        "Link not valid",
        "This link is unknown, already used or expired. Go back to your MCP client and try again.",
    )


def _mismatch(request: HttpRequest, where: str, elicitation: Elicitation | None = None) -> HttpResponse:
    audit.record(
        AuditEvent.Kind.IDENTITY_MISMATCH,
        request=request,
        user=request.user if request.user.is_authenticated else None,
        detail={
            "where": where,
            "elicitation": elicitation.elicitation_id[:8] if elicitation else None,
            "expected_user": elicitation.user_id if elicitation else None,
        },
    )
    signed_in = f"You are signed in as {request.user.get_username()}. " if request.user.is_authenticated else ""
    return _error(
        request,
        403,
        "Wrong account",
        signed_in + "This link was made for another account. Sign in with the account you use in your MCP client, "
        "or ask for a new link there.",
    )


def _pending(elicitation_id: str) -> Elicitation | None:
    """The pending, unexpired URL elicitation ``elicitation_id`` (expired ones are marked so)."""
    if not isinstance(elicitation_id, str) or not ELICITATION_ID_RE.fullmatch(elicitation_id):
        return None
    row = (
        Elicitation.objects.select_related("provider", "application", "session", "session__application")
        .filter(elicitation_id=elicitation_id, mode=Elicitation.Mode.URL, status=Elicitation.Status.PENDING)
        .first()
    )
    if row is None:
        return None
    if row.is_expired:
        Elicitation.objects.filter(pk=row.pk, status=Elicitation.Status.PENDING).update(
            status=Elicitation.Status.EXPIRED, completed_at=timezone.now()
        )
        return None
    return row


def _remember_state(request: HttpRequest, state: str, entry: dict[str, Any]) -> None:
    pending = dict(request.session.get(SESSION_KEY) or {})
    now = time.time()
    ttl = float(elicitation_settings.STATE_TTL_SECONDS)
    pending = {key: value for key, value in pending.items() if now - float(value.get("at", 0)) < ttl}
    while len(pending) >= MAX_PENDING:
        oldest = min(pending, key=lambda key: pending[key].get("at", 0))
        pending.pop(oldest)
    pending[state] = {**entry, "at": now}
    request.session[SESSION_KEY] = pending


def _take_state(request: HttpRequest, state: Any) -> dict[str, Any] | None:
    """Pop the pending authorization of ``state`` (single use); None when unknown or expired."""
    if not isinstance(state, str) or not state or len(state) > 200:
        return None
    pending = dict(request.session.get(SESSION_KEY) or {})
    entry = pending.pop(state, None)
    request.session[SESSION_KEY] = pending
    if not isinstance(entry, dict):
        return None
    if time.time() - float(entry.get("at", 0)) >= float(elicitation_settings.STATE_TTL_SECONDS):
        return None
    return entry


def _send_to_provider(
    request: HttpRequest, provider: ThirdPartyProvider, scopes: list[str], elicitation_id: str
) -> HttpResponse:
    auth = build_authorization_request(provider, scopes)
    _remember_state(
        request,
        auth.state,
        {
            "provider": provider.slug,
            "elicitation": elicitation_id,
            "verifier": auth.code_verifier,
            "user": request.user.pk,
            "scopes": scopes,
        },
    )
    return secure_ui(SeeOther(auth.url))


def _client_name(row: Elicitation) -> str:
    """The asking client as the consent page names it (the token's OAuth client, in both eras;
    the session's for a row created before rows kept it), else "your MCP client". Shown as text
    (the templates escape it)."""
    application = row.application
    if application is None and row.session is not None:
        application = row.session.application
    if application is None:
        return "your MCP client"
    return str(mcp_oauth_settings.adapter.describe_client(application)["name"] or "your MCP client")


@require_http_methods(["GET", "HEAD", "POST"])
def start(request: HttpRequest, elicitation_id: str) -> HttpResponse:
    """The link of a URL elicitation: verify the user, then show the interstitial or the secure form.

    GET: 404 for an unknown / finished / expired id; login redirect when signed out; 403
    (audited) for another user; else the page of its kind. POST ``action=continue``: 303 to
    the third party (``connect``, with a new ``state`` + PKCE kept in the session) or to the
    target (``external``); ``action=save`` (``secret``) stores the value encrypted and completes;
    ``action=cancel`` finishes the elicitation as cancelled. CSRF-protected.
    """
    refused = _throttled(request)
    if refused is not None:
        return refused
    row = _pending(elicitation_id)
    if row is None:
        return _not_found(request)
    if not request.user.is_authenticated:
        return secure_ui(redirect_to_login(request.get_full_path(), login_url()))
    if row.user_id != request.user.pk:
        return _mismatch(request, "start", row)
    context = {
        "elicitation": row,
        "client_name": _client_name(row),
        "account": request.user.get_username(),
        "tool_name": row.tool_name,
    }
    action = request.POST.get("action") if request.method == "POST" else None
    if action == "cancel":
        finish_elicitation(row.elicitation_id, Elicitation.Status.CANCELLED, user=request.user, request=request)
        return _done(request, "Cancelled", "Nothing was changed.", ok=False)
    if row.kind != Elicitation.Kind.EXTERNAL:
        unconfigured = _unconfigured(request)
        if unconfigured is not None:
            return unconfigured
    if row.kind == Elicitation.Kind.SECRET:
        return _secret(request, row, context, action)
    if action == "continue":
        if row.kind == Elicitation.Kind.CONNECT:
            provider = row.provider
            if provider is None or not provider.enabled:
                return _error(request, 410, "Provider unavailable", "This service can no longer be connected.")
            return _send_to_provider(request, provider, row.scope_list, row.elicitation_id)
        return secure_ui(SeeOther(row.target_url))
    if action is not None:
        context["form_error"] = "Nothing was done: choose Continue or Cancel."
        return _page(request, elicitation_settings.START_TEMPLATE, context, status=400)
    return _page(request, elicitation_settings.START_TEMPLATE, context)


def _secret(request: HttpRequest, row: Elicitation, context: dict[str, Any], action: str | None) -> HttpResponse:
    limit = int(elicitation_settings.SECRET_MAX_LENGTH)
    context = {**context, "max_length": limit}
    if action is None:
        return _page(request, elicitation_settings.SECRET_TEMPLATE, context)
    if action != "save":
        context["form_error"] = "Nothing was saved: choose Save or Cancel."
        return _page(request, elicitation_settings.SECRET_TEMPLATE, context, status=400)
    value = request.POST.get("value", "")
    if not value.strip() or len(value) > limit or not storable(value) or "\n" in value or "\r" in value:
        context["form_error"] = f"Enter a value of 1 to {limit} characters on one line."
        return _page(request, elicitation_settings.SECRET_TEMPLATE, context, status=400)
    with transaction.atomic():
        if not finish_elicitation(row.elicitation_id, Elicitation.Status.COMPLETED, user=request.user, request=request):
            return _not_found(request)
        StoredSecret.objects.update_or_create(
            user=request.user,  # type: ignore[misc]  # signed in: checked at the top of the view
            name=row.secret_name,
            defaults={"value_encrypted": encrypt(value.strip())},
        )
        audit.record(AuditEvent.Kind.SECRET_STORED, request=request, detail={"name": row.secret_name})
    return _done(
        request,
        "Saved",
        f"{row.secret_name} is stored encrypted on this site; it never went through your MCP client.",
    )


@require_GET
def callback(request: HttpRequest, provider_slug: str) -> HttpResponse:
    """The third party's redirect back (RFC 6749 §4.1.2): finish the connection.

    Checks in order: ``state`` known to this browser session, unused and unexpired, and issued
    for this provider (400); the logged-in user is the one who started, and the elicitation's
    user (403, audited); RFC 9207 ``iss`` equals the provider's issuer when present, and is
    present when the provider announces it (400, mix-up defence, RFC 9700 §4.4.2). Then an
    ``error`` from the provider (RFC 6749 §4.1.2.1) finishes the elicitation: ``declined`` for
    ``access_denied``, ``failed`` for any other code; a ``code`` is exchanged server-side, and
    when the provider fails the exchange (RFC 6749 §5.2, an HTTP error, an unreadable answer,
    unreachable) the elicitation is ``failed`` and the page answers 502. Either way the outcome is
    terminal and told at once (SEP-1036 completion notification to a 2025-11-25 session; the
    2026-07-28 retry reads it), and ``error`` holds only the OAuth error code
    (:mod:`elicitation.failures`). On success the tokens are stored encrypted, and the
    elicitation completes.
    """
    refused = _throttled(request) or _unconfigured(request)
    if refused is not None:
        return refused
    entry = _take_state(request, request.GET.get("state"))
    if entry is None or entry.get("provider") != provider_slug:
        return _error(
            request,
            400,
            "Sign-in not recognised",
            "This sign-in answer is unknown, already used or expired. Start again from your MCP client.",
        )
    if not request.user.is_authenticated or request.user.pk != entry.get("user"):
        return _mismatch(request, "callback")
    provider = ThirdPartyProvider.objects.filter(slug=provider_slug, enabled=True).first()
    if provider is None:
        return _error(request, 410, "Provider unavailable", "This service can no longer be connected.")
    row = None
    if entry.get("elicitation"):
        row = _pending(entry["elicitation"])
        if row is None:
            return _not_found(request)
        if row.user_id != request.user.pk:
            return _mismatch(request, "callback", row)
    iss = request.GET.get("iss")
    expected_iss = provider.issuer.rstrip("/")
    if expected_iss and (
        (iss is not None and iss.rstrip("/") != expected_iss) or (iss is None and provider.iss_parameter_supported)
    ):
        return _error(request, 400, "Sign-in not recognised", "The answer did not come from the expected service.")
    error = request.GET.get("error")
    if error is not None:
        reason = provider_error(error)
        if row is not None:
            status = Elicitation.Status.DECLINED if error == "access_denied" else Elicitation.Status.FAILED
            finish_elicitation(row.elicitation_id, status, user=request.user, request=request, error=reason)
        return _done(
            request,
            "Not connected",
            f"{provider.name} did not connect your account: {describe(provider.name, reason)}."
            + (" Your MCP client has been told." if row is not None else ""),
            ok=False,
        )
    code = request.GET.get("code")
    if not code or len(code) > 2000:
        return _error(request, 400, "Sign-in not recognised", "The answer carried no authorization code.")
    scopes = [str(scope) for scope in entry.get("scopes") or []]
    try:
        payload = exchange_code(provider, code, str(entry.get("verifier") or ""))
    except ProviderError as exc:
        logger.warning("code exchange at %s failed: %r", provider.slug, exc.error)
        reason = provider_error(exc.error)
        if row is None:
            return _error(
                request,
                502,
                "Connection failed",
                f"{provider.name} did not complete the sign-in: {describe(provider.name, reason)}. "
                "Nothing was stored; try again from this page.",
            )
        finish_elicitation(
            row.elicitation_id, Elicitation.Status.FAILED, user=request.user, request=request, error=reason
        )
        return _done(
            request,
            "Connection failed",
            f"{provider.name} did not complete the sign-in: {describe(provider.name, reason)}. "
            "Nothing was stored. Your MCP client has been told; to try again, ask it to run the tool again.",
            ok=False,
            status=502,
        )
    connection = store_connection(
        request.user, provider, payload, scopes, row.organization_id if row is not None else None
    )  # reads the account label: no transaction open
    with transaction.atomic():
        audit.record(
            AuditEvent.Kind.CONNECTION_CREATED,
            request=request,
            detail={
                "provider": provider.slug,
                "scopes": connection.scope_list,
                "elicitation": row.elicitation_id[:8] if row else None,
            },
            organization=connection.organization_id,
        )
        if row is not None:
            finish_elicitation(row.elicitation_id, Elicitation.Status.COMPLETED, user=request.user, request=request)
    connection_created.send(sender=ThirdPartyConnection, connection=connection, user=request.user)
    account = f"Your {provider.name} account{(' ' + connection.account_label) if connection.account_label else ''} is connected."
    if row is None:
        messages.success(request, account)
        return secure_ui(SeeOther(reverse("elicitation:connections")))
    return _done(request, "Connected", account)


@require_http_methods(["GET", "HEAD", "POST"])
def connections(request: HttpRequest) -> HttpResponse:
    """The signed-in user's third-party connections, stored values and waiting requests.

    GET lists the enabled providers and the user's connections (account, scopes, dates; never a
    token), the names of the values stored on the secure input page (never the values), and the
    user's pending URL elicitations with their links (this is how a user whose MCP client cannot
    open links finishes them). POST ``action=connect&provider=<slug>`` starts the provider's
    authorization (303); ``action=disconnect&provider=<slug>`` revokes the connection (RFC 7009
    at the provider when it has a revocation endpoint); ``action=forget&name=<name>`` deletes a
    stored value; both come back here (303). CSRF-protected.
    """
    refused = _throttled(request)
    if refused is not None:
        return refused
    if not request.user.is_authenticated:
        return secure_ui(redirect_to_login(request.get_full_path(), login_url()))
    if request.method == "POST":
        unconfigured = _unconfigured(request)
        if unconfigured is not None:
            return unconfigured
        slug = request.POST.get("provider", "")
        valid_slug = bool(SLUG_RE.fullmatch(slug))
        provider = ThirdPartyProvider.objects.filter(slug=slug, enabled=True).first() if valid_slug else None
        action = request.POST.get("action")
        if action == "forget":
            name = request.POST.get("name", "")
            if not name or len(name) > 100 or not storable(name):
                return _error(request, 400, "Bad request", "Unknown stored value.")
            deleted, _ = StoredSecret.objects.filter(user=request.user, name=name).delete()
            if deleted:
                audit.record(AuditEvent.Kind.SECRET_DELETED, request=request, detail={"name": name})
                messages.success(request, f"Deleted the stored value {name}.")
            else:
                messages.info(request, f"There was no stored value {name}; nothing was deleted.")
            return secure_ui(SeeOther(reverse("elicitation:connections")))
        if action not in {"connect", "disconnect"}:
            return _connections_page(request, 400, "Nothing was changed: the form did not say what to do.")
        if provider is None:
            return _connections_page(
                request, 400, "Nothing was changed: that service is unknown or can no longer be connected."
            )
        if action == "connect":
            return _send_to_provider(request, provider, provider.scope_list, "")
        connection = (
            ThirdPartyConnection.objects.filter(user=request.user, provider=provider).select_related("provider").first()
        )
        if connection is not None:
            revoke_connection(connection, request=request, actor=request.user, reason="disconnected by the user")
            messages.success(
                request, f"Disconnected {provider.name}: this site no longer holds access to your account there."
            )
        else:
            messages.info(request, f"{provider.name} was not connected; nothing was changed.")
        return secure_ui(SeeOther(reverse("elicitation:connections")))
    return _connections_page(request)


def _connections_page(request: HttpRequest, status: int = 200, form_error: str = "") -> HttpResponse:
    """The connections page; requests already satisfied (a connect request for a service the user is
    connected to) are not listed as waiting."""
    user = request.user
    if not user.is_authenticated:  # as in connections(), which signs the user in before coming here
        return secure_ui(redirect_to_login(request.get_full_path(), login_url()))
    mine = {c.provider_id: c for c in ThirdPartyConnection.objects.filter(user=user)}
    rows = [(provider, mine.get(provider.pk)) for provider in ThirdPartyProvider.objects.filter(enabled=True)]
    waiting = [
        row
        for row in Elicitation.objects.filter(
            user=user,
            mode=Elicitation.Mode.URL,
            status=Elicitation.Status.PENDING,
            expires_at__gt=timezone.now(),
        )
        .select_related("provider")
        .order_by("-created_at")[:20]
        if not (row.kind == Elicitation.Kind.CONNECT and row.provider_id in mine)
    ]
    secrets = StoredSecret.objects.filter(user=user).order_by("name")
    return _page(
        request,
        elicitation_settings.CONNECTIONS_TEMPLATE,
        {
            "rows": rows,
            "waiting": waiting,
            "secrets": secrets,
            "account": user.get_username(),
            "form_error": form_error,
        },
        status=status,
    )
