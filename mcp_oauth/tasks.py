"""Celery tasks of the app.

``mcp_oauth.tasks.cleanup`` deletes what is no longer needed: MCP sessions that
ended or idled out (their outbox goes with them), redeemed-code records older
than ``MCP_OAUTH["REDEEMED_CODE_RETENTION_SECONDS"]`` and the ``jti`` records of
JWT assertions that have expired. Schedule it with Celery beat,
e.g. hourly::

    CELERY_BEAT_SCHEDULE = {
        "mcp-oauth-cleanup": {"task": "mcp_oauth.tasks.cleanup", "schedule": 3600},
        "mcp-oauth-prune-dcr": {"task": "mcp_oauth.tasks.prune_dynamic_clients", "schedule": 3600},
        "mcp-oauth-prune-refresh-generations": {"task": "mcp_oauth.tasks.prune_refresh_generations", "schedule": 3600},
    }

``mcp_oauth.tasks.prune_dynamic_clients`` deletes dynamically registered clients (RFC 7591)
nobody uses: see its docstring for the rules. ``mcp_oauth.tasks.prune_refresh_generations``
deletes the bookkeeping of refresh-token rotation once its tokens are gone.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.settings import oauth2_settings

# The CIMD fetch/refresh tasks live in mcp_oauth.authorization_server.cimd.tasks and the Tasks-extension jobs in
# mcp_oauth.mcp_server.mcp_tasks.jobs; importing them here registers them with workers that autodiscover this module.
from mcp_oauth import retention
from mcp_oauth.authorization_server.cimd import tasks as cimd_tasks  # noqa: F401
from mcp_oauth.authorization_server.client_registry.clients import one_generation_bump
from mcp_oauth.authorization_server.organizations.token_binding import prune_token_organizations
from mcp_oauth.authorization_server.token_exchange.actor import prune_token_actors
from mcp_oauth.authorization_server.tokens.rotation import prune_generations
from mcp_oauth.authorization_server.user_data import memberships  # noqa: F401  (mcp_oauth.organizations.reconcile_member)
from mcp_oauth.authorization_server.user_data.lifecycle import clients_settled, delete_client_tokens, lock_clients
from mcp_oauth.dpop.bindings import prune_bindings
from mcp_oauth.mcp_server.mcp_tasks import jobs as mcp_task_jobs  # noqa: F401  (mcp_oauth.mcp_tasks.run / .reconcile)
from mcp_oauth.models import McpSession, RedeemedAuthorizationCode
from mcp_oauth.resource_server.cache import batched_invalidation
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.batches import delete_in_batches

log = logging.getLogger(__name__)


@shared_task(name="mcp_oauth.tasks.cleanup", ignore_result=True)
def cleanup() -> dict[str, int]:
    """Delete dead sessions, old redeemed-code records, the DPoP bindings of expired tokens
    (:func:`mcp_oauth.dpop.bindings.prune_bindings`) and the organizations of expired codes and tokens
    (:func:`~mcp_oauth.authorization_server.organizations.token_binding.prune_token_organizations`), the actors of expired
    exchanged tokens (:func:`~mcp_oauth.authorization_server.token_exchange.actor.prune_token_actors`), and apply the retention settings
    (:func:`mcp_oauth.retention.prune`: audit events and their IP addresses, finished tasks, the
    ``jti`` records of expired JWT assertions, unused CIMD documents, old tool-call audit trail rows),
    in bounded batches.

    :returns: ``{"sessions": n, "redeemed_codes": m, "used_assertions": k, "dpop_bindings": b,
        "token_organizations": o, "token_actors": x, "audit_events": a, "audit_ips_cleared": i, "tasks": t, "cimd_documents": c, "tool_calls": r}`` — rows deleted
        (or cleared; outbox rows not counted).
    """
    now = timezone.now()
    idle_cutoff = now - timedelta(seconds=mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS)
    dead = McpSession.objects.filter(ended_at__isnull=False) | McpSession.objects.filter(last_seen_at__lt=idle_cutoff)
    sessions = dead.count()
    dead.delete()
    code_cutoff = now - timedelta(seconds=mcp_oauth_settings.REDEEMED_CODE_RETENTION_SECONDS)
    codes = delete_in_batches(RedeemedAuthorizationCode.objects.filter(redeemed_at__lt=code_cutoff))
    retained = retention.prune(now)
    return {
        **retained,
        "sessions": sessions,
        "redeemed_codes": codes,
        "dpop_bindings": prune_bindings(now),
        "token_organizations": prune_token_organizations(now),
        "token_actors": prune_token_actors(now),
    }


def prunable_dynamic_clients(now=None):
    """The dynamically registered applications :func:`prune_dynamic_clients` would delete, as a queryset.

    An application registered through RFC 7591 (``registration_source == "dcr"``) is prunable when
    it has no authorization code still pending and either

    * it **never obtained a token** (no access or refresh token besides its RFC 7592 registration
      access token, ``ClientProfile.last_used_at`` unset) and registered more than
      ``DCR_PRUNE_UNUSED_AFTER_DAYS`` days ago; or
    * **all its tokens have been expired** for ``DCR_PRUNE_AFTER_DAYS`` days: it registered and was
      last used (token issued or refreshed) before that, no access token expires later than that,
      and no refresh token can still be used (every one revoked, or orphaned, or past
      ``REFRESH_TOKEN_EXPIRE_SECONDS``).

    The second rule also takes a never-used client once it is that old. A setting of ``None``
    switches its rule off. Applications registered in the admin or through
    Client ID Metadata Documents are never pruned.
    """
    Application = get_application_model()
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    now = now or timezone.now()
    registration_scope = oauth2_settings.DCR_REGISTRATION_SCOPE
    user_tokens = AccessToken.objects.filter(application=OuterRef("pk")).exclude(scope=registration_scope)
    any_refresh = RefreshToken.objects.filter(application=OuterRef("pk"))
    pending_code = get_grant_model().objects.filter(application=OuterRef("pk"), expires__gt=now)
    base = Application.objects.filter(registration_source=Application.RegistrationSource.DCR).exclude(
        Exists(pending_code)
    )
    rules = Q(pk__in=[])

    unused_days = mcp_oauth_settings.DCR_PRUNE_UNUSED_AFTER_DAYS
    if unused_days is not None:
        cutoff = now - timedelta(days=unused_days)
        rules |= Q(
            ~Exists(user_tokens),
            ~Exists(any_refresh),
            Q(mcp_profile__isnull=True) | Q(mcp_profile__last_used_at__isnull=True),
            created__lt=cutoff,
        )

    expired_days = mcp_oauth_settings.DCR_PRUNE_AFTER_DAYS
    if expired_days is not None:
        cutoff = now - timedelta(days=expired_days)
        live_access = user_tokens.filter(expires__gte=cutoff)
        usable_refresh = any_refresh.filter(revoked__isnull=True, access_token__isnull=False)
        refresh_lifetime = oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS
        if refresh_lifetime:
            seconds = (
                refresh_lifetime.total_seconds() if isinstance(refresh_lifetime, timedelta) else float(refresh_lifetime)
            )
            # DOT: a refresh token dies REFRESH_TOKEN_EXPIRE_SECONDS after its access token expires.
            usable_refresh = usable_refresh.filter(access_token__expires__gte=cutoff - timedelta(seconds=seconds))
        rules |= Q(
            ~Exists(live_access),
            ~Exists(usable_refresh),
            Q(mcp_profile__isnull=True)
            | Q(mcp_profile__last_used_at__isnull=True)
            | Q(mcp_profile__last_used_at__lt=cutoff),
            created__lt=cutoff,
        )
    return base.filter(rules)


@shared_task(name="mcp_oauth.tasks.prune_dynamic_clients", ignore_result=True)
def prune_dynamic_clients() -> dict[str, int]:
    """Delete the applications :func:`prunable_dynamic_clients` selects, with their profiles, tokens,
    consents and everything else that cascades from them.

    In bounded batches: the next ``DCR_PRUNE_BATCH_SIZE`` primary keys of dynamically registered
    clients (keyset order, never all rows at once), then, in one transaction per batch, the
    prunable ones in that primary-key range are locked (their pending codes, refresh-token
    generations and rows, as a single deletion does: :mod:`.authorization_server.lifecycle`),
    selected again (a client that obtained a token meanwhile survives), their tokens deleted and
    they are deleted, with one clients-generation bump and one token-cache invalidation per batch. Memory stays that of one batch
    whatever the table's size; every batch of the table is visited in one run.

    :returns: ``{"clients": n}`` — applications deleted.
    """
    Application = get_application_model()
    batch = max(1, int(mcp_oauth_settings.DCR_PRUNE_BATCH_SIZE))
    dynamic = Application.objects.filter(registration_source=Application.RegistrationSource.DCR).order_by("pk")
    now = timezone.now()
    count, last = 0, None
    while True:
        window = dynamic.filter(pk__gt=last) if last is not None else dynamic
        chunk = list(window.values_list("pk", flat=True)[:batch])
        if not chunk:
            break
        last = chunk[-1]
        in_range = prunable_dynamic_clients(now).filter(pk__gte=chunk[0], pk__lte=last)
        with transaction.atomic(), one_generation_bump(), batched_invalidation():
            candidates = list(in_range.values_list("pk", flat=True))
            if not candidates:
                continue
            lock_clients(Application, candidates)
            pks = list(prunable_dynamic_clients(now).filter(pk__in=candidates).values_list("pk", flat=True))
            if not pks:
                continue
            delete_client_tokens(pks)
            with clients_settled(pks):
                _, per_model = Application.objects.filter(pk__in=pks).delete()
            count += per_model.get(Application._meta.label, 0)
    if count:
        log.info("Pruned %d unused dynamically registered clients.", count)
    return {"clients": count}


@shared_task(name="mcp_oauth.tasks.prune_refresh_generations", ignore_result=True)
def prune_refresh_generations() -> int:
    """Delete refresh-token generations left without tokens for a day
    (:func:`mcp_oauth.authorization_server.tokens.rotation.prune_generations`; DOT's ``cleartokens``
    deletes the tokens). :returns: the number of generations deleted."""
    return prune_generations()
