"""The hot path's caches (mcp_oauth.resource_server.cache) and their invalidation, in one process.

The two-process proof (two uvicorn workers sharing Redis and PostgreSQL) is in
tests/topology/test_production_topology.py.
"""

from __future__ import annotations

import time

import pytest
from django.core.cache import cache
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_oauth.mcp_server.tools import ToolRegistry
from mcp_oauth.mcp_server.transport.sessions import SESSION_PREFIX
from mcp_oauth.models import McpSession, ProtectedResource
from mcp_oauth.resource_server.cache import (
    TOKEN_PREFIX,
    TOMBSTONE,
    access_token_by_checksum,
    bump_resource_generation,
    resource_by_uri,
    token_checksum,
)
from mcp_oauth.settings import mcp_oauth_settings

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT_BOTH = "application/json, text/event-stream"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "cache-test", "version": "1"},
    },
}


def post_initialize(token: str):
    return Client().post(
        "/mcp", INIT, content_type="application/json", HTTP_ACCEPT=ACCEPT_BOTH, HTTP_AUTHORIZATION=f"Bearer {token}"
    )


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


def test_second_lookup_is_served_from_the_cache_without_a_query(token):
    checksum = token_checksum(token)
    with CaptureQueriesContext(connection) as first:
        found = access_token_by_checksum(checksum)
    assert found is not None and found.user.username == "alice"
    # the token row, and (a per-process cache: the test settings' LocMem) the revocation stamp
    # read once per REVOCATION_CHECK_SECONDS (mcp_oauth.resource_server.revocation)
    assert [q for q in first.captured_queries if "revocationstamp" not in q["sql"]] == first.captured_queries[-1:]
    assert len(first.captured_queries) == 2
    with CaptureQueriesContext(connection) as second:
        again = access_token_by_checksum(checksum)
    assert second.captured_queries == []
    assert again.pk == found.pk and again.user.username == "alice" and again.application.name == "Test client"
    # the cache holds the row under the checksum, never the raw token
    assert cache.get(TOKEN_PREFIX + checksum).pk == found.pk
    assert cache.get(TOKEN_PREFIX + token) is None


def test_authenticated_initialize_costs_no_resource_or_token_query_once_warm(token):
    assert post_initialize(token).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert post_initialize(token).status_code == 200
    tables = " ".join(query["sql"] for query in queries.captured_queries)
    assert "oauth2_provider_accesstoken" not in tables
    assert "mcp_oauth_protectedresource" not in tables


def test_revoked_token_is_refused_at_once(token):
    assert post_initialize(token).status_code == 200
    get_access_token_model().objects.get(token_checksum=token_checksum(token)).revoke()
    response = post_initialize(token)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]


def test_deleted_token_is_refused_at_once(token):
    assert post_initialize(token).status_code == 200
    get_access_token_model().objects.filter(token_checksum=token_checksum(token)).delete()
    assert post_initialize(token).status_code == 401


def test_deactivated_user_is_refused_at_once(token, user):
    assert post_initialize(token).status_code == 200
    user.is_active = False
    user.save()
    assert post_initialize(token).status_code == 401


def test_a_login_does_not_invalidate_the_users_tokens(token, user):
    from django.utils import timezone

    assert post_initialize(token).status_code == 200
    user.last_login = timezone.now()
    user.save(update_fields=["last_login"])
    assert cache.get(TOKEN_PREFIX + token_checksum(token)) not in (None, TOMBSTONE)


def test_deleted_client_is_refused_at_once(token, public_app):
    assert post_initialize(token).status_code == 200
    public_app.delete()
    assert post_initialize(token).status_code == 401


def test_disabled_resource_stops_being_served_at_once(token, resource):
    assert post_initialize(token).status_code == 200
    resource.enabled = False
    resource.save()
    assert post_initialize(token).status_code == 404
    resource.enabled = True
    resource.save()
    assert post_initialize(token).status_code == 200


def test_resource_registry_answers_without_a_query_and_reloads_on_a_new_generation(resource):
    resource_by_uri(resource.uri)
    with CaptureQueriesContext(connection) as queries:
        assert resource_by_uri(resource.uri + "/").pk == resource.pk  # canonical form
    assert queries.captured_queries == []
    ProtectedResource.objects.filter(pk=resource.pk).update(enabled=False)  # no signal
    assert resource_by_uri(resource.uri).pk == resource.pk  # still cached
    bump_resource_generation()  # what a bulk update must be followed by
    with pytest.raises(ProtectedResource.DoesNotExist):
        resource_by_uri(resource.uri)


def test_a_flushed_cache_makes_the_registry_reload(resource):
    resource_by_uri(resource.uri)
    ProtectedResource.objects.filter(pk=resource.pk).update(name="renamed")
    cache.clear()  # e.g. Redis restarted without persistence
    assert resource_by_uri(resource.uri).name == "renamed"


def test_a_stale_reader_cannot_write_back_an_invalidated_entry(token):
    """Race: a request read the row before the revocation and caches it after: the tombstone wins."""
    checksum = token_checksum(token)
    stale = get_access_token_model().objects.select_related("application", "user").get(token_checksum=checksum)
    stale.revoke()  # tombstones the key
    assert cache.add(TOKEN_PREFIX + checksum, stale, timeout=300) is False
    assert access_token_by_checksum(checksum) is None


def test_entries_never_outlive_the_token(resource, user, public_app, mint_token):
    short = mint_token(user, public_app, "mcp", resource.uri, expires_in=2)
    access_token_by_checksum(token_checksum(short))
    key = cache.make_key(TOKEN_PREFIX + token_checksum(short))
    expiry = cache._expire_info[key]  # LocMemCache internals: absolute expiry time
    import time

    assert expiry - time.time() <= 2


def test_dotted_path_settings_are_imported_once(settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "TOOL_REGISTRY": "mcp_oauth.mcp_server.tools.registry",
        "THROTTLE_KEY_FUNCTION": "tests.mcp_oauth.resource_server.test_cache.caller",
    }
    assert isinstance(mcp_oauth_settings.TOOL_REGISTRY, ToolRegistry)
    assert mcp_oauth_settings.THROTTLE_KEY_FUNCTION is caller
    assert "TOOL_REGISTRY" in vars(mcp_oauth_settings)  # kept: no import on the next access


def test_an_unimportable_dotted_path_names_the_setting(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_KEY_FUNCTION": "tests.nowhere.caller"}
    with pytest.raises(ImportError, match=r"MCP_OAUTH\['THROTTLE_KEY_FUNCTION'\]"):
        _ = mcp_oauth_settings.THROTTLE_KEY_FUNCTION


def caller(request, scope):
    return "fixed"


# --- the session cache (mcp_oauth.mcp_server.transport.sessions) -------------------------------------


def _ping(token: str, session_id: str):
    return Client().post(
        "/mcp",
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        content_type="application/json",
        HTTP_ACCEPT=ACCEPT_BOTH,
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_MCP_SESSION_ID=session_id,
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
    )


def _delete(token: str, session_id: str):
    return Client().delete(
        "/mcp",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_MCP_SESSION_ID=session_id,
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
    )


def test_a_warm_session_request_costs_no_query(token):
    session_id = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, session_id).status_code == 200  # loads and caches the session
    assert cache.get(SESSION_PREFIX + session_id)["protocol_version"] == "2025-11-25"
    with CaptureQueriesContext(connection) as queries:
        response = _ping(token, session_id)
    assert response.status_code == 200 and response.json()["result"] == {}
    assert queries.captured_queries == []


def test_a_deleted_session_is_404_at_once_although_it_was_cached(token):
    session_id = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, session_id).status_code == 200
    assert _delete(token, session_id).status_code == 204
    assert cache.get(SESSION_PREFIX + session_id) == TOMBSTONE
    assert _ping(token, session_id).status_code == 404


def test_a_saved_or_deleted_session_row_is_forgotten(token):
    session_id = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, session_id).status_code == 200
    row = McpSession.objects.get(pk=session_id)
    row.ended_at = timezone.now()
    row.save()  # the admin, say
    assert _ping(token, session_id).status_code == 404
    other = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, other).status_code == 200
    McpSession.objects.filter(pk=other).delete()
    assert _ping(token, other).status_code == 404


def test_a_cached_session_is_404_for_another_principal(token, other_user, public_app, resource, mint_token):
    session_id = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, session_id).status_code == 200
    assert _ping(mint_token(other_user, public_app, "mcp", resource.uri), session_id).status_code == 404


def test_set_level_is_seen_by_the_next_request(token):
    session_id = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, session_id).status_code == 200
    response = Client().post(
        "/mcp",
        {"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "error"}},
        content_type="application/json",
        HTTP_ACCEPT=ACCEPT_BOTH,
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_MCP_SESSION_ID=session_id,
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
    )
    assert response.status_code == 200
    assert cache.get(SESSION_PREFIX + session_id) == TOMBSTONE
    assert _ping(token, session_id).status_code == 200
    assert McpSession.objects.get(pk=session_id).log_level == "error"


def test_a_cached_session_entry_expires_when_its_touch_is_due(token, settings):
    session_id = post_initialize(token)["Mcp-Session-Id"]
    assert _ping(token, session_id).status_code == 200
    key = cache.make_and_validate_key(SESSION_PREFIX + session_id)
    assert 55 <= cache._expire_info[key] - time.time() <= 60  # TOUCH_INTERVAL_SECONDS


# --- tombstones: before the commit, and again only when needed --------------------------


def counted_writes(monkeypatch) -> list[list[str]]:
    """The tombstone writes that reach the cache from now on (each: the keys written)."""
    from mcp_oauth.resource_server import cache as token_cache

    writes: list[list[str]] = []
    write = token_cache._write_tombstones

    def counting(keys):
        writes.append(list(keys))
        return write(keys)

    monkeypatch.setattr(token_cache, "_write_tombstones", counting)
    return writes


def test_an_invalidation_is_written_once_when_the_first_write_lands(monkeypatch):
    from mcp_oauth.resource_server.cache import forget_token

    writes = counted_writes(monkeypatch)
    key = TOKEN_PREFIX + "a" * 64
    with transaction.atomic():
        forget_token("a" * 64)
        assert writes == [[key]] and cache.get(key) == TOMBSTONE  # before the commit
    assert writes == [[key]]  # the commit hook had nothing left to do


def test_an_invalidation_the_cache_refused_is_written_again_after_the_commit(monkeypatch, caplog):
    from redis.exceptions import ConnectionError as RedisConnectionError

    from mcp_oauth.resource_server.cache import _cache, forget_token

    writes = counted_writes(monkeypatch)
    token_cache, key = _cache(), TOKEN_PREFIX + "b" * 64
    real_set, refusals = token_cache.set, []

    def refusing_once(*args, **kwargs):
        if not refusals:
            refusals.append(args[0])
            raise RedisConnectionError("connection refused")
        return real_set(*args, **kwargs)

    monkeypatch.setattr(token_cache, "set", refusing_once)
    with transaction.atomic():
        forget_token("b" * 64)
        assert cache.get(key) is None and "could not invalidate 1 entries" in caplog.text
    assert writes == [[key], [key]] and token_cache.get(key) == TOMBSTONE


def test_an_invalidation_older_than_half_the_tombstone_life_is_written_again(monkeypatch):
    from mcp_oauth.resource_server import cache as token_cache

    writes = counted_writes(monkeypatch)
    monkeypatch.setattr(token_cache, "TOMBSTONE_SECONDS", 0)  # every transaction is "long"
    with transaction.atomic():
        token_cache.forget_token("c" * 64)
    assert writes == [[TOKEN_PREFIX + "c" * 64]] * 2
