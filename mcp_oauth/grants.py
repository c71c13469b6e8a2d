"""What a user has granted to MCP clients, and taking it back.

* :func:`user_grants` — the clients a user has authorized (active consents), with what the
  connected-apps page shows about each;
* :func:`revoke_user_grants` — revoke one client's (or all clients') access for a user: the
  access and refresh tokens (RFC 7009 semantics, via :func:`~mcp_oauth.models.consent.revoke_client_tokens`)
  and the consent, with one ``token.revoked`` audit event per client.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import Max
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings

from .audit import record
from .models import AuditEvent, Consent
from .models.consent import revoke_client_tokens

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
    last_used_at: datetime | None  # the newest token issued to the client for this user


def user_grants(user) -> list[Grant]:
    """The clients ``user`` has authorized and not revoked, most recently approved first."""
    consents = list(
        Consent.objects.filter(user=user, revoked_at__isnull=True).select_related("application").order_by("-last_granted_at", "-id")
    )
    last_used = dict(
        get_access_token_model()
        .objects.filter(user=user, application__in=[c.application_id for c in consents])
        .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
        .values_list("application")
        .annotate(last=Max("created"))
        .values_list("application", "last")
    )
    descriptions = get_scopes_backend().get_all_scopes()
    grants = []
    for consent in consents:
        application = consent.application
        source = getattr(application, "registration_source", "manual") or "manual"
        client_id = application.client_id
        grants.append(
            Grant(
                application=application,
                name=application.name or client_id,
                registration_source=source,
                registration_label=REGISTRATION_LABELS.get(source, source),
                client_id_host=urlsplit(client_id).hostname if client_id.startswith("https://") else None,
                scopes=consent.scope.split(),
                scope_items=[(scope, descriptions.get(scope, "")) for scope in consent.scope.split()],
                resources=list(consent.resources or []),
                granted_at=consent.last_granted_at,
                last_used_at=last_used.get(application.pk),
            )
        )
    return grants


def revoke_user_grants(user, application=None, *, reason: str) -> int:
    """Revoke what ``user`` granted to ``application`` (``None``: to every client).

    For each client the user has a consent or a token for: its access tokens are deleted, its
    live refresh tokens revoked (RFC 7009 §2.1; DOT keeps them as tombstones for reuse
    detection, RFC 9700 §4.14.2), the consent is marked revoked (the next authorization asks
    again), and a ``token.revoked`` audit event is written with ``detail = {"via": "user",
    "action": "revoke consent", "reason": reason, "count": n}``. Clients the user never
    authorized are untouched; the RFC 7592 registration token of a client is kept.

    :param reason: why, in a few words (kept in the audit event), e.g. ``"revoked on the connected apps page"``.
    :returns: the number of tokens revoked (access tokens plus live refresh tokens).
    """
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    consents = Consent.objects.filter(user=user, revoked_at__isnull=True)
    tokens = AccessToken.objects.filter(user=user).exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    refresh = RefreshToken.objects.filter(user=user, revoked__isnull=True)
    if application is not None:
        consents, tokens, refresh = (q.filter(application=application) for q in (consents, tokens, refresh))
    application_ids = (
        set(consents.values_list("application_id", flat=True))
        | set(tokens.values_list("application_id", flat=True))
        | set(refresh.values_list("application_id", flat=True))
    )
    total = 0
    now = timezone.now()
    for client in get_application_model().objects.filter(pk__in=application_ids):
        with transaction.atomic():
            count = revoke_client_tokens(client, user=user)
            Consent.objects.filter(user=user, application=client, revoked_at__isnull=True).update(revoked_at=now)
            record(
                AuditEvent.Kind.TOKEN_REVOKED,
                user=user,
                client_id=client.client_id,
                detail={"via": "user", "action": "revoke consent", "reason": reason, "count": count},
            )
        total += count
    return total
