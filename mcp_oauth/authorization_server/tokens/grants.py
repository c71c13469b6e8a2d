"""What a user has granted to MCP clients, and taking it back.

* :func:`user_grants` — the clients a user has authorized (active consents), with what the
  connected-apps page shows about each (when its connection lapses, and, for clients that share a name, what tells them
  apart: client_id, registration date, redirect hosts);
* :func:`revoke_user_grants` — revoke one client's (or all clients') access for a user: the
  access and refresh tokens and the consents, audited, with a signal for caches. Used by the
  connected-apps page and the account-lifecycle receivers (:mod:`mcp_oauth.authorization_server.user_data.lifecycle`:
  password change, deactivation, deletion).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.tokens.session_limits import connection_lapses
from mcp_oauth.models import (
    AuditEvent,
    Consent,
    RefreshGeneration,
    RefreshTokenGeneration,
    TokenOrganization,
    ToolCallUse,
)
from mcp_oauth.signals import user_grants_revoked

#: How each ``Application.registration_source`` is named to users.
REGISTRATION_LABELS = {
    "manual": "registered by this site's administrators",
    "cimd": "identified by its metadata document",
    "dcr": "registered itself dynamically",
}


@dataclass(frozen=True)
class Grant:
    """One client a user has authorized (see :func:`user_grants`)."""

    application: object
    name: str
    registration_source: str  # "manual", "cimd" or "dcr"
    registration_label: str
    client_id_host: str | None  # the host of a CIMD client_id URL, else None
    scopes: list[str]
    scope_items: list[tuple[str, str]]  # (scope, its description in OAUTH2_PROVIDER["SCOPES"])
    resources: list[str]
    granted_at: datetime
    last_used_at: datetime | None  # the newest token issued to, or tool call by, the client for this user
    client_id_short: str = ""  # a CIMD client_id URL in full, another client_id's first 8 characters and "…"
    registered_at: datetime | None = None  # when the application was registered (``Application.created``)
    redirect_hosts: tuple[str, ...] = ()  # the hosts of its redirect URIs, in order, once each
    same_name: bool = False  # another of the user's grants has the same name (case and spaces aside)
    organization: object = None  # the Organization the consent acts for (chosen on the consent page), or None
    # When the connection ends if the client does nothing: the earlier of its refresh token's idle expiry and
    # its session's cap (tokens.session_limits.connection_lapses); None: nothing ends it, or nothing is live.
    lapses_at: datetime | None = None
    lapse_reason: str = ""  # what ends it then: "idle", "cap" or "access_token" (session_limits.Lapse)


def short_client_id(client_id: str) -> str:
    """``client_id`` as shown to users: a CIMD URL in full (it names its host), else its first 8 characters
    (:func:`user_grants` shows it in full when two of a user's clients would share a short form)."""
    if client_id.startswith("https://") or len(client_id) <= 12:
        return client_id
    return client_id[:8] + "…"


def _name_key(name: str) -> str:
    return " ".join(name.split()).casefold()


def _redirect_hosts(redirect_uris: str) -> tuple[str, ...]:
    hosts = []
    for uri in redirect_uris.split():
        try:
            host = urlsplit(uri).hostname
        except ValueError:  # not a URL (the registration checks refuse these; an old row may hold one)
            continue
        if host:
            hosts.append(host)
    return tuple(dict.fromkeys(hosts))


def user_grants(user) -> list[Grant]:
    """The clients ``user`` has authorized and not revoked, most recently approved first."""
    consents = list(
        Consent.objects.filter(user=user, revoked_at__isnull=True)
        .select_related("application", "organization")
        .order_by("-last_granted_at", "-id")
    )
    last_used = dict(
        get_access_token_model()
        .objects.filter(user=user, application__in=[c.application_id for c in consents])
        .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
        .values_list("application")
        .annotate(last=Max("created"))
        .values_list("application", "last")
    )
    # The newest tool call through the client for this user (the audit trail's ToolCallUse, one row
    # per client and user) counts too: a client may use one long-lived token for weeks.
    for client_id, at in ToolCallUse.objects.filter(
        user=user, client_id__in=[c.application.client_id for c in consents]
    ).values_list("client_id", "last_used_at"):
        for consent in consents:
            if consent.application.client_id == client_id:
                current = last_used.get(consent.application_id)
                last_used[consent.application_id] = at if current is None or at > current else current
    descriptions = get_scopes_backend().get_all_scopes()
    # One count per application: a client connected for two organizations is one application.
    applications = list({consent.application_id: consent.application for consent in consents}.values())
    names = Counter(_name_key(application.name or application.client_id) for application in applications)
    shorts = Counter(short_client_id(application.client_id) for application in applications)
    lapses = connection_lapses(user, applications) if applications else {}
    grants = []
    for consent in consents:
        application = consent.application
        name = application.name or application.client_id
        source = getattr(application, "registration_source", "manual") or "manual"
        client_id = application.client_id
        grants.append(
            Grant(
                application=application,
                name=name,
                registration_source=source,
                registration_label=REGISTRATION_LABELS.get(source, source),
                client_id_host=urlsplit(client_id).hostname if client_id.startswith("https://") else None,
                scopes=consent.scope.split(),
                scope_items=[(scope, descriptions.get(scope, "")) for scope in consent.scope.split()],
                resources=list(consent.resources or []),
                granted_at=consent.last_granted_at,
                last_used_at=last_used.get(application.pk),
                client_id_short=client_id if shorts[short_client_id(client_id)] > 1 else short_client_id(client_id),
                registered_at=getattr(application, "created", None),
                redirect_hosts=_redirect_hosts(application.redirect_uris or ""),
                same_name=names[_name_key(name)] > 1,
                organization=consent.organization,
                lapses_at=getattr(lapses.get(application.pk), "at", None),
                lapse_reason=getattr(lapses.get(application.pk), "reason", ""),
            )
        )
    return grants


#: ``organization`` of :func:`revoke_user_grants` when every connection counts, whatever it acts for.
ANY_ORGANIZATION: Any = object()


def revoke_user_grants(user, application=None, *, reason: str, organization: Any = ANY_ORGANIZATION) -> int:
    """Revoke the MCP access and refresh tokens and the consents of ``user`` (for ``application`` only, when given).

    Refresh tokens are marked revoked (kept as tombstones: presenting one later is a reuse,
    RFC 9700 §4.14.2) and their access tokens deleted; other access tokens are deleted
    (RFC 7009 §2.1). RFC 7592 registration access tokens are kept (they grant no access to
    any resource). Consents get ``revoked_at``, so the next authorization shows the consent
    page again. One ``grants.revoked`` audit event is written with ``detail = {"reason",
    "client_id", "tokens", "consents"}``, and :data:`mcp_oauth.signals.user_grants_revoked` is
    sent once the transaction commits (``sender=<user model>, user, application, reason,
    access_token_ids``) so caches of token principals can drop them.

    :param reason: why, e.g. ``"password_changed"``, ``"deactivated"``, ``"deleted"``, ``"user_disconnected"``.
    :param organization: only the connections acting for this :class:`~mcp_oauth.models.Organization`
        (its consents, and the tokens whose :class:`~mcp_oauth.models.TokenOrganization` names it), or,
        with None, only those acting for none; by default every connection.
    :returns: the number of tokens revoked (access tokens plus live refresh tokens).
    """
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    filters: dict[str, Any] = {"user": user}
    if application is not None:
        filters["application"] = application
    refresh_filters, access_filters = dict(filters), dict(filters)
    if organization is not ANY_ORGANIZATION:
        bound = (
            TokenOrganization.objects.all()
            if organization is None
            else TokenOrganization.objects.filter(organization=organization)
        )
        kinds = TokenOrganization.Kind
        for into, kind in ((refresh_filters, kinds.REFRESH_TOKEN), (access_filters, kinds.ACCESS_TOKEN)):
            checksums = bound.filter(token_kind=kind).values("token_checksum")
            into["token_checksum__in" if organization is not None else "_exclude"] = checksums
    with transaction.atomic():
        # The newest generation of each of the user's families first: a rotation or a grace
        # sibling in flight holds it until it commits, and the pair it issues is then read and
        # revoked below instead of escaping (mcp_oauth.authorization_server.tokens.rotation).
        members = _exclude(RefreshTokenGeneration.objects.all(), refresh_filters, "refresh_token__")
        list(
            RefreshGeneration.objects.select_for_update()
            .filter(pk__in=members.values("generation"), rotated_at__isnull=True)
            .order_by("created_at", "pk")
            .values_list("pk", flat=True)
        )
        live_refresh = list(
            _exclude(RefreshToken.objects.select_for_update().filter(revoked__isnull=True), refresh_filters)
        )
        access = _exclude(AccessToken.objects.all(), access_filters).exclude(
            scope=oauth2_settings.DCR_REGISTRATION_SCOPE
        )
        access_ids = list(access.values_list("pk", flat=True))
        for refresh_token in live_refresh:
            refresh_token.revoke()  # also deletes its access token
        AccessToken.objects.filter(pk__in=access_ids).delete()
        consents = Consent.objects.filter(user=user, revoked_at__isnull=True)
        if application is not None:
            consents = consents.filter(application=application)
        if organization is not ANY_ORGANIZATION:
            consents = consents.filter(organization=organization)
        consent_count = consents.update(revoked_at=timezone.now())
        revoked = len(live_refresh) + len(access_ids)
        record(
            AuditEvent.Kind.GRANTS_REVOKED,
            user=user if getattr(user, "pk", None) else None,
            client_id=application.client_id if application is not None else "",
            detail={
                "reason": reason,
                "user_id": str(user.pk),
                "client_id": getattr(application, "client_id", None),
                "tokens": revoked,
                "consents": consent_count,
                **(
                    {"organization": getattr(organization, "slug", None)}
                    if organization is not ANY_ORGANIZATION
                    else {}
                ),
            },
            organization=organization if organization is not ANY_ORGANIZATION else None,
        )
        transaction.on_commit(
            lambda: user_grants_revoked.send(
                sender=type(user), user=user, application=application, reason=reason, access_token_ids=access_ids
            )
        )
    return revoked


def _exclude(queryset, filters: dict[str, Any], prefix: str = ""):
    """``queryset`` filtered by ``filters``; an ``_exclude`` entry (token checksums) is excluded instead."""
    excluded = filters.get("_exclude")
    queryset = queryset.filter(**{f"{prefix}{name}": value for name, value in filters.items() if name != "_exclude"})
    if excluded is not None:
        queryset = queryset.exclude(**{f"{prefix}token_checksum__in": excluded})
    return queryset
