"""The elicitation app's part of a user's data export and erasure (GDPR Art. 15/17/20).

Receivers of :data:`mcp_oauth.signals.user_data_export` and :data:`mcp_oauth.signals.user_data_erase`
(connected in :meth:`elicitation.apps.ElicitationConfig.ready`):

* export: ``elicitations`` (mode, kind, message, status, dates; a form answer's content; never a
  secret value), ``third_party_connections`` (provider, scopes, account label, dates; never a
  token), ``stored_secrets`` (names and dates; never a value);
* erase: the user's elicitations, stored secrets and third-party connections are deleted; a
  connection's tokens are revoked at its provider when the provider has a revocation endpoint
  (RFC 7009), best effort and off the request: after the commit, on a Celery worker
  (``elicitation.tasks.revoke_at_provider``, which receives only the encrypted tokens), or on a
  background thread when the site has no Celery app.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import current_app
from django.db import transaction
from django.utils import timezone

from elicitation import providers
from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.service import finish_elicitation
from elicitation.tasks import revoke_at_provider
from mcp_oauth import audit
from mcp_oauth.models import AuditEvent
from mcp_oauth.shared.taskqueue import celery_configured

log = logging.getLogger(__name__)

CHUNK = 500


def _elicitations(user_pk: Any):
    rows = Elicitation.objects.filter(user_id=user_pk).order_by("pk")
    for values in rows.values(
        "elicitation_id",
        "mode",
        "kind",
        "message",
        "status",
        "tool_name",
        "scopes",
        "secret_name",
        "content",
        "created_at",
        "completed_at",
        "expires_at",
        "provider__slug",
    ).iterator(chunk_size=CHUNK):
        row: dict[str, Any] = dict(values)
        row["provider"] = row.pop("provider__slug")
        if row["kind"] == Elicitation.Kind.SECRET:
            row["content"] = None  # the secure input page's value is a stored secret: never exported
        yield row


def _connections(user_pk: Any):
    rows = ThirdPartyConnection.objects.filter(user_id=user_pk).order_by("pk")
    yield from rows.values(
        "provider__slug",
        "provider__name",
        "scopes",
        "account_label",
        "token_type",
        "expires_at",
        "created_at",
        "updated_at",
        "last_used_at",
    ).iterator(chunk_size=CHUNK)


def _secrets(user_pk: Any):
    yield from (
        StoredSecret.objects.filter(user_id=user_pk)
        .order_by("pk")
        .values("name", "created_at", "updated_at")
        .iterator(chunk_size=CHUNK)
    )


def export_sections(sender: Any, user: Any, export: Any, **kwargs: Any) -> None:
    """``user_data_export`` receiver: add this app's sections."""
    export.add_section("elicitations", _elicitations(user.pk))
    export.add_section("third_party_connections", _connections(user.pk))
    export.add_section("stored_secrets", _secrets(user.pk))


def _revoke_all(pending: list[tuple[int, list[tuple[str, str]]]]) -> None:
    """After the erasure's commit: a Celery worker revokes (the message carries ciphertext only);
    without a broker (no Celery app, or eager tasks) a background thread does, with the providers
    read here, so the request never waits for a provider."""
    if celery_configured() and not current_app.conf.task_always_eager:
        for provider_pk, tokens in pending:
            revoke_at_provider.delay(provider_pk, tokens)
        return
    found = ThirdPartyProvider.objects.in_bulk([provider_pk for provider_pk, _ in pending])
    work = [(found[provider_pk], tokens) for provider_pk, tokens in pending if provider_pk in found]

    def run() -> None:
        for provider, tokens in work:
            try:
                providers.revoke_at_provider(provider, tokens)
            except Exception:  # best effort: never let one provider stop the others
                log.exception("revocation at %s failed", provider.slug)

    threading.Thread(target=run, name="elicitation-revoke", daemon=True).start()


def erase_rows(sender: Any, user: Any, reason: str = "", counts: dict[str, int] | None = None, **kwargs: Any) -> None:
    """``user_data_erase`` receiver: delete this app's rows of ``user``; revoke connections at their providers."""
    counts = counts if counts is not None else {}
    pending = [
        (
            row["provider_id"],
            [(row["refresh_token_encrypted"], "refresh_token"), (row["access_token_encrypted"], "access_token")],
        )
        for row in ThirdPartyConnection.objects.filter(user_id=user.pk, provider__revocation_endpoint__gt="").values(
            "provider_id", "refresh_token_encrypted", "access_token_encrypted"
        )
    ]
    counts["third_party_connections"], _ = ThirdPartyConnection.objects.filter(user_id=user.pk).delete()
    counts["stored_secrets"], _ = StoredSecret.objects.filter(user_id=user.pk).delete()
    counts["elicitations"], _ = Elicitation.objects.filter(user_id=user.pk).delete()
    if pending:
        transaction.on_commit(lambda: _revoke_all(pending))


def organization_member_removed(sender: Any, organization: Any, user: Any, **kwargs: Any) -> None:
    """:data:`mcp_oauth.signals.organization_member_removed` receiver: ``user`` keeps nothing of
    ``organization`` here either. Their pending URL elicitations of it are cancelled (the asking
    session is told, as for any finished elicitation), their pending form elicitations of it
    expire, and the third-party connections made for it alone (``organization`` set) are deleted
    (audit ``connection.revoked``, reason ``organization_member_removed``) and revoked at their
    providers once the transaction commits."""
    with transaction.atomic():
        pending = Elicitation.objects.filter(user=user, organization=organization, status=Elicitation.Status.PENDING)
        for elicitation_id in pending.filter(mode=Elicitation.Mode.URL).values_list("elicitation_id", flat=True):
            finish_elicitation(elicitation_id, Elicitation.Status.CANCELLED, user=user)
        pending.filter(mode=Elicitation.Mode.FORM).update(
            status=Elicitation.Status.EXPIRED, completed_at=timezone.now()
        )
        connections = ThirdPartyConnection.objects.filter(user=user, organization=organization).select_related(
            "provider"
        )
        work = [
            (
                row.provider_id,
                [(row.refresh_token_encrypted, "refresh_token"), (row.access_token_encrypted, "access_token")],
            )
            for row in connections
            if row.provider.revocation_endpoint
        ]
        for row in connections:
            audit.record(
                AuditEvent.Kind.CONNECTION_REVOKED,
                user=user,
                detail={"provider": row.provider.slug, "reason": "organization_member_removed"},
                organization=organization,
            )
        connections.delete()
        if work:
            transaction.on_commit(lambda: _revoke_all(work))
