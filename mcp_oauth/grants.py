"""Take back what a user granted: :func:`revoke_user_grants`.

Used by the account-lifecycle receivers (:mod:`mcp_oauth.lifecycle`: password change,
deactivation, deletion) and by pages that let users disconnect an application.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings

from .audit import record
from .models import AuditEvent, Consent
from .signals import user_grants_revoked


def revoke_user_grants(user, application=None, *, reason: str) -> int:
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
    :returns: the number of tokens revoked (access tokens plus live refresh tokens).
    """
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    filters = {"user": user}
    if application is not None:
        filters["application"] = application
    with transaction.atomic():
        live_refresh = list(RefreshToken.objects.select_for_update().filter(revoked__isnull=True, **filters))
        access = AccessToken.objects.filter(**filters).exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
        access_ids = list(access.values_list("pk", flat=True))
        for refresh_token in live_refresh:
            refresh_token.revoke()  # also deletes its access token
        AccessToken.objects.filter(pk__in=access_ids).delete()
        consents = Consent.objects.filter(user=user, revoked_at__isnull=True)
        if application is not None:
            consents = consents.filter(application=application)
        consent_count = consents.update(revoked_at=timezone.now())
        revoked = len(live_refresh) + len(access_ids)
        record(
            AuditEvent.Kind.GRANTS_REVOKED,
            user=user if getattr(user, "pk", None) else None,
            client_id=application.client_id if application is not None else "",
            detail={"reason": reason, "user_id": str(user.pk), "client_id": getattr(application, "client_id", None),
                    "tokens": revoked, "consents": consent_count},
        )
        transaction.on_commit(
            lambda: user_grants_revoked.send(
                sender=type(user), user=user, application=application, reason=reason, access_token_ids=access_ids
            )
        )
    return revoked
