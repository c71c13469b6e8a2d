"""The revocation stamp (mcp_oauth.resource_server.revocation), in one process.

With a token cache of the process's own (the test settings' ``LocMemCache``, as ``make run``):
every invalidating change increments the stamp in its own transaction (a rollback leaves it);
a token cached under an older stamp is looked up again; the hot path sends a request to the
thread path once ``REVOCATION_CHECK_SECONDS`` passed; a shared cache neither bumps nor reads it.
The cross-process proof is tests/topology/test_revocation_cross_process.py.
"""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import ProtectedResource, RevocationStamp
from mcp_oauth.resource_server.cache import TOKEN_PREFIX, access_token_by_checksum, resource_by_uri, token_checksum
from mcp_oauth.resource_server.revocation import STAMP_ATTRIBUTE, is_local, read_stamp, watch

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


def other_process_changes(change) -> None:
    """``change()`` as another process makes it: the stamp moves, this process's cache does not
    hear of it (its entries are put back as they were)."""
    from django.core.cache import cache

    kept = {key: value for key, value in cache._cache.items()}  # LocMem's own store
    expiry = dict(cache._expire_info)
    known, config, checked_at = watch.version, watch.config_version, watch.checked_at
    change()
    cache._cache.clear()
    cache._cache.update(kept)
    cache._expire_info.update(expiry)
    watch.version, watch.config_version, watch.checked_at = known, config, checked_at  # not re-read here


def test_the_migration_creates_the_one_row():
    assert list(RevocationStamp.objects.values_list("pk", flat=True)) == [1]


@pytest.mark.parametrize(
    "change",
    [
        "delete_user",
        "deactivate_user",
        "revoke_token",
        "delete_client",
        "disable_resource",
    ],
)
def test_every_invalidating_change_bumps_the_stamp(token, user, public_app, resource, change):
    before = read_stamp()
    if change == "delete_user":
        user.delete()
    elif change == "deactivate_user":
        user.is_active = False
        user.save()
    elif change == "revoke_token":
        get_access_token_model().objects.get(token_checksum=token_checksum(token)).revoke()
    elif change == "delete_client":
        public_app.delete()
    else:
        resource.enabled = False
        resource.save()
    assert read_stamp() > before


def test_a_login_or_a_new_token_does_not_bump_it(user, public_app, resource, mint_token):
    before = read_stamp()
    mint_token(user, public_app, "mcp", resource.uri)
    user.save(update_fields=["last_login"])
    assert read_stamp() == before


def test_the_bump_is_in_the_change_s_transaction(token, user):
    before = read_stamp()
    with pytest.raises(RuntimeError), transaction.atomic():
        user.is_active = False
        user.save()
        raise RuntimeError("rolled back")
    assert read_stamp() == before


def test_a_token_cached_under_an_older_stamp_is_looked_up_again(token, user, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REVOCATION_CHECK_SECONDS": 3600}
    checksum = token_checksum(token)
    cached = access_token_by_checksum(checksum)
    assert cached.__dict__[STAMP_ATTRIBUTE] == watch.version
    with CaptureQueriesContext(connection) as warm:
        assert access_token_by_checksum(checksum) is not None
    assert warm.captured_queries == []  # fresh stamp, current entry: no query

    other_process_changes(user.delete)
    # within REVOCATION_CHECK_SECONDS this process still trusts what it knows (the bound) ...
    assert access_token_by_checksum(checksum) is not None
    # ... and once it is due, the stamp is read again and the entry is stale: the database says
    watch.expire()
    assert access_token_by_checksum(checksum) is None


def test_the_event_loop_path_defers_to_the_thread_once_the_stamp_is_due(token, settings):
    from asgiref.sync import async_to_sync
    from django.test import RequestFactory

    from mcp_oauth.resource_server.authentication import authenticate_bearer_cached

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REVOCATION_CHECK_SECONDS": 3600}
    access_token_by_checksum(token_checksum(token))
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    resource_by_uri(ProtectedResource.objects.default().uri)  # the registry loaded
    uri = ProtectedResource.objects.default().uri
    assert async_to_sync(authenticate_bearer_cached)(request, uri) is not None
    watch.expire()
    assert async_to_sync(authenticate_bearer_cached)(request, uri) is None  # the thread path reads it


def test_a_resource_disabled_by_another_process_is_dropped_once_the_stamp_is_read(resource, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REVOCATION_CHECK_SECONDS": 3600}
    assert resource_by_uri(resource.uri) == resource

    def disable():
        ProtectedResource.objects.filter(pk=resource.pk).update(enabled=False)
        from mcp_oauth.resource_server.revocation import bump_stamp

        bump_stamp(config=True)  # what bump_resource_generation() does

    other_process_changes(disable)
    assert resource_by_uri(resource.uri) == resource  # not due yet: the registry as loaded
    watch.expire()
    with pytest.raises(ProtectedResource.DoesNotExist):
        resource_by_uri(resource.uri)


def test_a_shared_cache_neither_bumps_nor_reads_the_stamp(token, user, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": True}
    assert not is_local()
    before = read_stamp()
    checksum = token_checksum(token)
    with CaptureQueriesContext(connection) as first:
        access_token_by_checksum(checksum)
    assert all("revocationstamp" not in q["sql"] for q in first.captured_queries)
    user.is_active = False
    user.save()
    assert read_stamp() == before


def test_the_backend_decides_when_unset(settings):
    assert is_local()  # the test settings' LocMemCache
    settings.CACHES = {
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"},
    }
    assert not is_local()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": False}
    assert is_local()


def _ids(messages) -> list[str]:
    return [m.id for m in messages if m.id in ("mcp_oauth.W071", "mcp_oauth.E071")]


def test_w071_a_process_local_token_cache_on_a_database_server(settings):
    settings.DATABASES = {**settings.DATABASES}
    settings.DATABASES["default"] = {**settings.DATABASES["default"], "ENGINE": "django.db.backends.postgresql"}
    assert _ids(run_checks()) == ["mcp_oauth.W071"]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": True}
    assert _ids(run_checks()) == []


def test_w071_a_celery_broker_or_workers(settings, monkeypatch):
    settings.DATABASES = {**settings.DATABASES}
    settings.DATABASES["default"] = {**settings.DATABASES["default"], "ENGINE": "django.db.backends.sqlite3"}
    assert _ids(run_checks()) == []  # make run: one process (management commands aside)
    monkeypatch.setenv("WEB_CONCURRENCY", "2")
    assert _ids(run_checks()) == ["mcp_oauth.W071"]
    monkeypatch.delenv("WEB_CONCURRENCY")
    settings.CELERY_BROKER_URL, settings.CELERY_TASK_ALWAYS_EAGER = "redis://127.0.0.1:6379/0", False
    assert _ids(run_checks()) == ["mcp_oauth.W071"]


@pytest.mark.parametrize(("name", "value"), [("REVOCATION_CHECK_SECONDS", -1), ("TOKEN_CACHE_SHARED", "yes")])
def test_e071_malformed(settings, name, value):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, name: value}
    assert _ids(run_checks()) == ["mcp_oauth.E071"]


def test_the_cache_key_never_holds_the_raw_token(token):
    from django.core.cache import cache

    access_token_by_checksum(token_checksum(token))
    assert cache.get(TOKEN_PREFIX + token) is None
