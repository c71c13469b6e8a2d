"""Erase what the app holds about a person (GDPR Art. 17), with or without deleting the account.

:func:`erase_user_data` removes, in one transaction, everything of ``user`` that
``mcp_oauth`` keeps, revoking first (RFC 7009 semantics: the tokens stop working at once; caches
hear of it through :data:`mcp_oauth.signals.user_grants_revoked`):

* pending authorization codes, access, refresh and ID tokens (DOT's tables), consents;
* the bookkeeping keyed by their token families and code hashes: refresh-token generations
  (RFC 9700 §4.14.2 rotation), redeemed-code records (OAuth 2.1 §4.1.3 replay detection) and the
  DPoP bindings of their tokens (RFC 9449 §6);
* MCP sessions (their outboxes and subscriptions go with them), MCP tasks (a running task is
  cancelled: its executor finds the row gone at its next check and stops the tool), enterprise
  identities (ext-auth §4.3 links);
* then :data:`mcp_oauth.signals.user_data_erase` lets the ``elicitation`` app and the site erase
  their own rows (elicitations, third-party connections, stored secrets, ...).

Audit events stay (a security log must), anonymised: the user link and the IP address are
cleared and no ``detail`` key names the person (``user_id``, ``expected_user``, ``sub``, ``email``,
and ``by`` when it is them). One ``user.erased`` event records the erasure, with counts and no
identifier of the person.

The account's deletion (``User.delete()``, the admin) runs it from ``pre_delete``
(:mod:`mcp_oauth.authorization_server.user_data.lifecycle`); the admin's "erase" action and the
``erase_user_data`` management command run it for sites that keep accounts.
"""

from __future__ import annotations

from typing import Any

from django.db import router, transaction
from django.db.models import Q
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.authorization_server.tokens.rotation import take_write_lock
from mcp_oauth.models import (
    AuditEvent,
    Consent,
    DPoPBinding,
    EnterpriseIdentity,
    McpSession,
    McpTask,
    RedeemedAuthorizationCode,
    RefreshGeneration,
)
from mcp_oauth.shared.batches import update_in_batches
from mcp_oauth.signals import user_data_erase

#: ``detail`` keys that name a person; dropped from the audit rows of an erased user.
PERSONAL_DETAIL_KEYS = frozenset({"user_id", "expected_user", "sub", "email", "username", "account", "account_label"})

#: Audit rows rewritten per statement while anonymising.
AUDIT_BATCH = 1000


def _delete(queryset) -> int:
    """Delete ``queryset``; :returns: rows of its own model deleted (cascaded rows not counted)."""
    _, per_model = queryset.delete()
    return per_model.get(queryset.model._meta.label, 0)


def _rewrite(rows: list[Any], user_pk: Any) -> None:
    """Drop the personal ``detail`` keys naming ``user_pk`` from ``rows`` (and, for their own rows, the
    user link and the IP address); one ``UPDATE`` per row batch."""
    text = str(user_pk)
    for row in rows:
        detail = dict(row.detail or {})
        if row.user_id == user_pk:
            detail = {key: value for key, value in detail.items() if key not in PERSONAL_DETAIL_KEYS}
            row.user_id, row.ip_address = None, None
        else:
            for key in ("user_id", "expected_user"):
                if str(detail.get(key)) == text:
                    detail.pop(key)
        if detail.get("by") == user_pk:
            detail["by"] = None
        row.detail = detail
    AuditEvent.objects.bulk_update(rows, ["user_id", "ip_address", "detail"])


def _anonymise_audit(user_pk: Any) -> int:
    """Clear the user link, the IP address and the personal ``detail`` keys of the audit rows that
    concern ``user_pk``. :returns: rows rewritten.

    Three passes, none holding more than :data:`AUDIT_BATCH` rows: their own rows whose ``detail``
    has a personal key are rewritten row by row; other users' rows naming them lose that key; then
    the rest of their own rows (most of them) lose user link and IP address in range-batched
    ``UPDATE`` statements (:func:`~mcp_oauth.shared.batches.update_in_batches`), without being read."""
    own = AuditEvent.objects.filter(user_id=user_pk)
    by_them = Q(detail__by=user_pk)
    naming = Q(detail__user_id=str(user_pk)) | Q(detail__user_id=user_pk) | Q(detail__expected_user=user_pk) | by_them
    passes = (
        own.filter(Q(detail__has_any_keys=sorted(PERSONAL_DETAIL_KEYS)) | by_them),
        AuditEvent.objects.filter(naming).exclude(user_id=user_pk),
    )
    done = 0
    for selection in passes:
        last = 0
        while True:
            rows = list(selection.filter(pk__gt=last).order_by("pk")[:AUDIT_BATCH])
            if not rows:
                break
            _rewrite(rows, user_pk)
            done += len(rows)
            last = rows[-1].pk
    return done + update_in_batches(own, user_id=None, ip_address=None)


def erase_user_data(user: Any, *, reason: str = "erased", actor: Any = None, request: Any = None) -> dict[str, int]:
    """Revoke and delete everything the apps keep of ``user``; anonymise their audit rows.

    :param user: a saved user instance (the account itself is left alone).
    :param reason: why (``deleted`` for an account deletion, ``erased`` for the erase action and
        command); written in the ``grants.revoked`` and ``user.erased`` audit events.
    :param actor: who asked (an administrator), recorded as ``detail.by`` (their pk).
    :returns: rows deleted per kind, e.g. ``{"access_tokens": 2, "consents": 1, ...,
        "audit_anonymised": 12}`` (receivers of :data:`~mcp_oauth.signals.user_data_erase` add theirs).
    """
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    Grant, IDToken = get_grant_model(), get_id_token_model()
    pk = user.pk
    counts: dict[str, int] = {}
    with transaction.atomic(using=router.db_for_write(type(user))):
        take_write_lock()
        # A code exchange in flight holds its code's row until it commits: wait for it.
        list(Grant.objects.select_for_update().filter(user_id=pk).values_list("pk"))
        access = AccessToken.objects.filter(user_id=pk)
        refresh = RefreshToken.objects.filter(user_id=pk)

        def keys() -> tuple[set[Any], set[str]]:
            families = set(refresh.exclude(token_family=None).values_list("token_family", flat=True))
            checksums = {
                *access.values_list("token_checksum", flat=True),
                *refresh.values_list("token_checksum", flat=True),
            }
            return families, checksums

        # Read before the revocation (revoking a refresh token deletes its access token) and after
        # it (a rotation it waited for may have committed a new pair).
        families, checksums = keys()
        counts["tokens_revoked"] = revoke_user_grants(user, reason=reason)
        more_families, more_checksums = keys()
        families |= more_families
        checksums |= more_checksums
        counts["dpop_bindings"] = _delete(DPoPBinding.objects.filter(token_checksum__in=checksums))
        counts["redeemed_codes"] = _delete(
            RedeemedAuthorizationCode.objects.filter(Q(access_token__user_id=pk) | Q(token_family__in=families))
        )
        counts["refresh_tokens"] = _delete(refresh)
        counts["access_tokens"] = _delete(access)
        counts["refresh_generations"] = _delete(RefreshGeneration.objects.filter(token_family__in=families))
        counts["authorization_codes"] = _delete(Grant.objects.filter(user_id=pk))
        counts["id_tokens"] = _delete(IDToken.objects.filter(user_id=pk))
        counts["consents"] = _delete(Consent.objects.filter(user_id=pk))
        counts["tasks"] = _delete(McpTask.objects.filter(user_id=pk))
        counts["sessions"] = _delete(McpSession.objects.filter(user_id=pk))
        counts["enterprise_identities"] = _delete(EnterpriseIdentity.objects.filter(user_id=pk))
        user_data_erase.send(sender=type(user), user=user, reason=reason, counts=counts)
        counts["audit_anonymised"] = _anonymise_audit(pk)
        record(
            AuditEvent.Kind.USER_ERASED,
            request=None,
            detail={
                "reason": reason,
                "by": None if getattr(actor, "pk", None) == pk else getattr(actor, "pk", None),
                **counts,
            },
        )
    return counts
