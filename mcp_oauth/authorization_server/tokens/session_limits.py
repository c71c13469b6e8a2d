"""The limits of a session: the refresh token's idle window and the absolute cap from the authorization.

A *session* is one refresh-token family (RFC 9700 §4.14.2): it begins when an authorization code
is exchanged (``RefreshGeneration.session_started_at``, copied to every generation the rotations
of :mod:`.rotation` create) and goes on as long as the client refreshes, within two limits
(:mod:`.lifetimes`):

* **idle**: a refresh token unused for :func:`~.lifetimes.refresh_token_idle_seconds` since it was
  issued is refused; each refresh issues a new one, so using the session keeps it alive;
* **cap**: past :func:`~.lifetimes.session_max_seconds` from the session's start every refresh is
  refused, however recently the client refreshed.

Either refusal is ``invalid_grant`` (RFC 6749 §5.2) with a description saying which, audited as
``session.idle_expired`` / ``session.cap_reached``; nothing is revoked (the client's next step is
a new authorization). After the cap the user is asked again: a remembered consent older than the
cap no longer skips the consent page (:func:`consent_lapsed`).

:func:`connection_lapses` tells the connected-apps page when a user's connection to a client ends
if the client does nothing: the earlier of its newest refresh token's idle expiry and its session's
cap (with no live refresh token, when its access tokens expire).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.tokens.lifetimes import refresh_token_idle_seconds, session_max_seconds
from mcp_oauth.models import AuditEvent, Consent, RefreshGeneration

__all__ = ["Lapse", "check_session_limits", "connection_lapses", "consent_lapsed", "session_ends_at"]


def session_ends_at(application: Any, started_at: datetime | None) -> datetime | None:
    """When a session of ``application`` that started at ``started_at`` reaches its cap; None: no cap."""
    cap = session_max_seconds(application)
    if cap is None or started_at is None:
        return None
    return started_at + timedelta(seconds=cap)


def check_session_limits(refresh_token: Any, generation: RefreshGeneration | None, request: Any) -> None:
    """Refuse the refresh of ``refresh_token`` (a DOT ``RefreshToken`` row) past its idle window or its
    session's cap.

    :param generation: the token's generation (its ``session_started_at``); None for a token issued
        before generations existed (then only the idle window applies).
    :raises oauthlib.oauth2.rfc6749.errors.InvalidGrantError: past either limit (audited).
    """
    application = getattr(request, "client", None) or refresh_token.application
    now = timezone.now()
    idle = refresh_token_idle_seconds(application)
    if idle is not None and refresh_token.created + timedelta(seconds=idle) <= now:
        _refuse(
            AuditEvent.Kind.SESSION_IDLE_EXPIRED,
            refresh_token,
            request,
            {"idle_seconds": idle, "issued_at": refresh_token.created.isoformat()},
            "The refresh token was not used for too long; authorize again.",
        )
    started_at = getattr(generation, "session_started_at", None)
    ends_at = session_ends_at(application, started_at)
    if ends_at is not None and started_at is not None and ends_at <= now:
        _refuse(
            AuditEvent.Kind.SESSION_CAP_REACHED,
            refresh_token,
            request,
            {"session_max_seconds": session_max_seconds(application), "session_started_at": started_at.isoformat()},
            "The session has reached its maximum length; authorize again.",
        )


def _refuse(kind: str, refresh_token: Any, request: Any, detail: dict[str, Any], description: str) -> None:
    record(
        kind,
        request=request,
        user=refresh_token.user,
        client_id=getattr(getattr(request, "client", None), "client_id", "") or "",
        detail={"token_family": str(refresh_token.token_family) if refresh_token.token_family else None, **detail},
    )
    raise errors.InvalidGrantError(description=description, request=request)


def consent_lapsed(user: Any, application: Any) -> bool:
    """Whether ``user``'s remembered consent to ``application`` is older than the client's session cap:
    then the consent page is shown even where the adapter would skip it (the cap sends the user back
    to a decision, not only to a new code)."""
    cap = session_max_seconds(application)
    if cap is None or not getattr(user, "pk", None):
        return False
    granted = (
        Consent.objects.filter(user=user, application=application, revoked_at__isnull=True)
        .order_by("-last_granted_at")
        .values_list("last_granted_at", flat=True)
        .first()
    )
    return granted is not None and granted + timedelta(seconds=cap) <= timezone.now()


class Lapse(NamedTuple):
    """When a connection ends if the client does nothing, and what ends it: ``"idle"`` (its refresh
    token's idle window: each refresh pushes it back), ``"cap"`` (its session's cap: then the user is
    asked again) or ``"access_token"`` (no refresh token: its access token's expiry)."""

    at: datetime
    reason: str


def connection_lapses(user: Any, applications: list[Any]) -> dict[Any, Lapse | None]:
    """``{application pk: Lapse or None}``: when ``user``'s connection to each client ends if the client
    does nothing.

    For each client: the latest, over its live refresh tokens for ``user``, of the earlier of the
    token's idle expiry and its session's cap; with no live refresh token, its newest access token's
    expiry; None when nothing ends it (no limit configured) or nothing is live. Two queries.
    """
    pks = [application.pk for application in applications]
    by_pk = {application.pk: application for application in applications}
    lapses: dict[Any, Lapse | None] = dict.fromkeys(pks)
    now = timezone.now()
    open_ended: set[Any] = set()
    refresh_rows = (
        get_refresh_token_model()
        .objects.filter(user=user, application_id__in=pks, revoked__isnull=True, access_token__isnull=False)
        .values_list("application_id", "created", "mcp_generation__generation__session_started_at")
    )
    with_refresh: set[Any] = set()
    for application_id, created, started_at in refresh_rows:
        with_refresh.add(application_id)
        application = by_pk[application_id]
        idle = refresh_token_idle_seconds(application)
        capped = session_ends_at(application, started_at)
        ends = [
            Lapse(moment, reason)
            for moment, reason in (
                (created + timedelta(seconds=idle) if idle is not None else None, "idle"),
                (capped, "cap"),
            )
            if moment is not None
        ]
        if not ends:
            open_ended.add(application_id)
            continue
        end = min(ends)
        current = lapses[application_id]
        if end.at > now and (current is None or end.at > current.at):
            lapses[application_id] = end
    for application_id in open_ended:
        lapses[application_id] = None
    rest = [pk for pk in pks if pk not in with_refresh]
    if rest:
        for application_id, expires in (
            get_access_token_model()
            .objects.filter(user=user, application_id__in=rest, expires__gt=now)
            .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
            .values_list("application_id", "expires")
        ):
            current = lapses[application_id]
            if current is None or expires > current.at:
                lapses[application_id] = Lapse(expires, "access_token")
    return lapses
