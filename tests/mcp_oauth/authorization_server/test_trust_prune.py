"""Registration hygiene: the Celery task that prunes dynamically registered clients nobody uses."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
    set_token_value,
)
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models import ClientProfile, Consent
from mcp_oauth.tasks import cleanup, prunable_dynamic_clients, prune_dynamic_clients

pytestmark = pytest.mark.django_db

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
DAY = timedelta(days=1)


def app(source="dcr", age=timedelta(days=60), last_used=None):
    application = Application.objects.create(
        name=f"{source} client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/cb",
        registration_source=source,
    )
    Application.objects.filter(pk=application.pk).update(created=timezone.now() - age)
    if last_used is not None:
        ClientProfile.objects.create(application=application, last_used_at=timezone.now() - last_used)
    return application


def access_token(application, user=None, expired_for=None, scope="mcp"):
    token = AccessToken(
        user=user,
        application=application,
        scope=scope,
        expires=timezone.now() - expired_for if expired_for is not None else timezone.now() + DAY,
    )
    set_token_value(token, secrets.token_urlsafe(32))
    token.save()
    return token


def refresh_token(application, user, access, revoked=None):
    token = RefreshToken(user=user, application=application, access_token=access, revoked=revoked)
    set_token_value(token, secrets.token_urlsafe(32))
    token.save()
    return token


def pruned(*apps):
    prunable = set(prunable_dynamic_clients().values_list("pk", flat=True))
    return [a.pk in prunable for a in apps]


def test_never_used_client_is_pruned_after_a_day(user):
    old = app(age=2 * DAY)
    fresh = app(age=timedelta(hours=2))  # may be in the middle of its first authorization
    registration_only = app(age=2 * DAY)
    access_token(registration_only, scope=oauth2_settings.DCR_REGISTRATION_SCOPE)  # RFC 7592 token: not a use
    assert pruned(old, fresh, registration_only) == [True, False, True]
    assert prune_dynamic_clients.delay().get() == {"clients": 2}
    assert list(Application.objects.all()) == [fresh]


def test_client_with_a_pending_code_is_kept(user):
    waiting = app(age=2 * DAY)
    get_grant_model().objects.create(
        user=user,
        application=waiting,
        code=secrets.token_urlsafe(16),
        expires=timezone.now() + timedelta(minutes=1),
        redirect_uri="http://127.0.0.1/cb",
        scope="mcp",
        code_challenge="x" * 43,
        code_challenge_method="S256",
    )
    assert pruned(waiting) == [False]


def test_client_whose_tokens_all_expired_long_ago_is_pruned(user):
    stale = app(last_used=timedelta(days=40))
    access_token(stale, user, expired_for=timedelta(days=35))
    refresh_token(stale, user, None, revoked=timezone.now() - timedelta(days=35))  # rotated out / revoked
    recent = app(last_used=timedelta(days=40))
    access_token(recent, user, expired_for=timedelta(days=5))  # expired, but not for 30 days
    live = app(last_used=timedelta(days=40))
    access_token(live, user)
    used_lately = app(last_used=timedelta(days=3))  # its tokens were cleaned away, but it was used lately
    assert pruned(stale, recent, live, used_lately) == [True, False, False, False]


def test_a_usable_refresh_token_keeps_a_client(user, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "REFRESH_TOKEN_EXPIRE_SECONDS": None}
    holder = app(last_used=timedelta(days=40))
    refresh_token(holder, user, access_token(holder, user, expired_for=timedelta(days=35)))
    assert pruned(holder) == [False]  # refresh tokens never expire: it can still refresh
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "REFRESH_TOKEN_EXPIRE_SECONDS": 3 * 24 * 3600}
    assert pruned(holder) == [True]  # its refresh token died 32 days ago


def test_admin_and_cimd_clients_are_never_pruned():
    manual = app(source="manual")
    cimd = app(source="cimd")
    assert pruned(manual, cimd) == [False, False]


def test_rules_can_be_switched_off(settings, user):
    never_used = app(age=10 * DAY)
    stale = app(last_used=timedelta(days=40))
    access_token(stale, user, expired_for=timedelta(days=35))
    assert pruned(never_used, stale) == [True, True]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DCR_PRUNE_UNUSED_AFTER_DAYS": None}
    assert pruned(never_used, stale) == [False, True]  # (after 30 days the second rule would take it)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DCR_PRUNE_UNUSED_AFTER_DAYS": None, "DCR_PRUNE_AFTER_DAYS": None}
    assert pruned(never_used, stale) == [False, False]
    assert prune_dynamic_clients.delay().get() == {"clients": 0}


def test_pruning_takes_tokens_and_consents_with_it(user):
    stale = app(last_used=timedelta(days=40))
    access_token(stale, user, expired_for=timedelta(days=35))
    Consent.objects.create(user=user, application=stale, scope="mcp")
    assert prune_dynamic_clients.delay().get() == {"clients": 1}
    assert not AccessToken.objects.exists() and not Consent.objects.exists()
    assert cleanup.delay().get() == {
        "sessions": 0,
        "redeemed_codes": 0,
        "used_assertions": 0,
        "dpop_bindings": 0,
        "token_organizations": 0,
        "token_actors": 0,
        "audit_events": 0,
        "audit_ips_cleared": 0,
        "tasks": 0,
        "cimd_documents": 0,
        "tool_calls": 0,
    }  # the other task is still there


def test_pruning_goes_through_every_batch_of_primary_keys(settings, user):
    """Bounded batches (DCR_PRUNE_BATCH_SIZE primary keys at a time), all of them in one run; the
    clients that must stay, between them, stay; profiles go with their clients."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DCR_PRUNE_BATCH_SIZE": 2}
    doomed, kept = [], []
    for index in range(7):
        doomed.append(app(age=2 * DAY))
        ClientProfile.objects.create(application=doomed[-1], metadata={"n": index})
        kept.append(app(source="manual") if index % 2 else app(age=timedelta(hours=1)))
    used = app(age=2 * DAY)
    access_token(used, user)
    assert prune_dynamic_clients.delay().get() == {"clients": 7}
    assert set(Application.objects.values_list("pk", flat=True)) == {a.pk for a in [*kept, used]}
    assert not ClientProfile.objects.filter(application_id__in=[a.pk for a in doomed]).exists()


def test_each_batch_reads_and_deletes_a_bounded_slice(settings, user):
    """Every statement that lists client keys is bounded by the batch size (LIMIT 3), and each
    DELETE of clients names at most a batch of them."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DCR_PRUNE_BATCH_SIZE": 3}
    for _ in range(10):
        app(age=2 * DAY)
    with CaptureQueriesContext(connection) as queries:
        assert prune_dynamic_clients.delay().get() == {"clients": 10}
    table = Application._meta.db_table
    sqls = [q["sql"] for q in queries.captured_queries]
    limits = [int(n) for sql in sqls for n in re.findall(r"LIMIT (\d+)", sql)]
    assert limits and max(limits) <= 3
    deletes = [sql for sql in sqls if sql.startswith(f'DELETE FROM "{table}"')]
    assert len(deletes) == 4
    assert all(len(re.search(r"IN \(([^)]*)\)", sql).group(1).split(",")) <= 3 for sql in deletes)


def test_a_client_that_obtains_a_token_during_the_batch_survives(monkeypatch, user):
    """Selected, then used before its batch is locked: selected again under the locks, it stays,
    with its token."""
    import mcp_oauth.tasks as tasks

    racing, idle = app(age=2 * DAY), app(age=2 * DAY)
    real_lock = tasks.lock_clients

    def lock_after_a_grant(model, pks):
        assert racing.pk in pks
        access_token(racing, user)  # a token exchange that committed just before the locks
        return real_lock(model, pks)

    monkeypatch.setattr(tasks, "lock_clients", lock_after_a_grant)
    assert prune_dynamic_clients.delay().get() == {"clients": 1}
    assert list(Application.objects.values_list("pk", flat=True)) == [racing.pk]
    assert AccessToken.objects.filter(application=racing).count() == 1
    assert not Application.objects.filter(pk=idle.pk).exists()
