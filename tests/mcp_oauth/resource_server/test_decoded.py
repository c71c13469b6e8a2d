"""Token-cache entries decoded once per process (mcp_oauth.resource_server.decoded).

The bearer check reads the token's entry from the shared cache on every request; an entry whose
bytes did not change is not decoded again. What must hold: the same answer as decoding, a copy
of its own for every use, and a revocation (new bytes: a tombstone) refused at once although the
entry was kept decoded.
"""

from __future__ import annotations

import asyncio
import pickle
import secrets

import pytest
from django.test import AsyncRequestFactory
from oauth2_provider.models import get_access_token_model

from mcp_oauth.resource_server import cache as token_cache
from mcp_oauth.resource_server.authentication import authenticate_bearer_cached
from mcp_oauth.resource_server.cache import TOKEN_PREFIX, TOMBSTONE, access_token_by_checksum, token_checksum
from mcp_oauth.resource_server.decoded import DecodedEntries, detached_copy
from tests.support.topology import REDIS_URL, require_redis

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def token(resource, user, public_app, mint_token):
    return mint_token(user, public_app, "mcp", resource.uri)


@pytest.fixture
def access_token(token):
    return (
        get_access_token_model().objects.select_related("application", "user").get(token_checksum=token_checksum(token))
    )


class CountingLoads:
    """pickle.loads, counted."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, raw: bytes):
        self.calls += 1
        return pickle.loads(raw)


def test_the_same_bytes_are_decoded_once_and_give_the_same_values(access_token):
    entries, loads = DecodedEntries(lambda: 8), CountingLoads()
    raw = pickle.dumps(access_token)
    first = entries.decode("k", raw, loads)
    second = entries.decode("k", raw, loads)
    assert loads.calls == 1
    for decoded in (first, second):
        assert (decoded.pk, decoded.token_checksum, decoded.scope, decoded.resource, decoded.expires) == (
            access_token.pk,
            access_token.token_checksum,
            access_token.scope,
            access_token.resource,
            access_token.expires,
        )
        assert decoded.user.username == access_token.user.username
        assert decoded.application.client_id == access_token.application.client_id


def test_other_bytes_under_the_same_key_are_decoded_again(access_token):
    entries, loads = DecodedEntries(lambda: 8), CountingLoads()
    entries.decode("k", pickle.dumps(access_token), loads)
    access_token.scope = "mcp mcp:admin"
    changed = entries.decode("k", pickle.dumps(access_token), loads)
    assert loads.calls == 2
    assert changed.scope == "mcp mcp:admin"
    assert entries.decode("k", pickle.dumps(TOMBSTONE), loads) == TOMBSTONE
    assert entries.decode("k", pickle.dumps(TOMBSTONE), loads) == TOMBSTONE
    assert loads.calls == 4  # a tombstone is never kept
    assert len(entries) == 0  # ... and it replaced the token kept under its key


def test_every_use_gets_its_own_copy(access_token):
    """A tool that changes context.user (or the token's resource list) changes its own request's
    objects only, as when every request decoded its own."""
    entries = DecodedEntries(lambda: 8)
    raw = pickle.dumps(access_token)
    first = entries.decode("k", raw, pickle.loads)
    first.user.first_name = "changed by a tool"
    first.application.name = "changed too"
    first.resource.append("https://elsewhere.example/mcp")
    first.scope = "everything"
    second = entries.decode("k", raw, pickle.loads)
    assert second is not first and second.user is not first.user and second.application is not first.application
    assert second.user.first_name == access_token.user.first_name
    assert second.application.name == access_token.application.name
    assert second.resource == access_token.resource
    assert second.scope == access_token.scope
    assert second._state is not first._state and second._state.db == access_token._state.db
    assert second._state.adding is False


def test_a_detached_copy_saves_like_the_original(access_token):
    copy = detached_copy(access_token)
    copy.scope = "mcp mcp:admin"
    copy.save(update_fields=["scope"])
    access_token.refresh_from_db()
    assert access_token.scope == "mcp mcp:admin"
    assert copy.user.pk == access_token.user_id


def test_at_most_size_entries_are_kept_the_oldest_dropped_first(access_token):
    size = {"n": 2}
    entries, loads = DecodedEntries(lambda: size["n"]), CountingLoads()
    raw = pickle.dumps(access_token)
    for key in ("a", "b", "c"):
        entries.decode(key, raw, loads)
    assert len(entries) == 2
    entries.decode("b", raw, loads)
    entries.decode("c", raw, loads)
    assert loads.calls == 3  # b and c were kept
    entries.decode("a", raw, loads)
    assert loads.calls == 4  # a was dropped first
    size["n"] = 0
    entries.clear()
    entries.decode("a", raw, loads)
    entries.decode("a", raw, loads)
    assert (loads.calls, len(entries)) == (6, 0)  # 0: keep none (MCP_OAUTH["DECODED_TOKEN_ENTRIES"])


def test_other_kinds_of_entries_are_not_kept():
    entries, loads = DecodedEntries(lambda: 8), CountingLoads()
    session = pickle.dumps({"user_id": 1})
    entries.decode("s", session, loads)
    entries.decode("s", session, loads)
    generation = pickle.dumps("a" * 32)
    assert entries.decode("g", generation, loads) == "a" * 32
    assert entries.decode("g", generation, loads) == "a" * 32
    assert loads.calls == 3  # the dict twice, the string (immutable) once


# --- the bearer check on Redis -----------------------------------------------------------------


@pytest.fixture
def redis_token_cache(settings):
    """The token cache on Redis through the project's backend (native async reads, raw bytes)."""
    require_redis()
    settings.CACHES = {
        "default": {
            "BACKEND": "mcp_oauth.shared.redis_cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "decoded-" + secrets.token_hex(4),
        }
    }
    token_cache._decoded.clear()
    yield
    from django.core.cache import cache

    cache.clear()
    token_cache._decoded.clear()


def check(token: str, resource):
    request = AsyncRequestFactory().post("/mcp", headers={"Authorization": f"Bearer {token}"})
    return asyncio.run(authenticate_bearer_cached(request, resource.uri))


def warm(token: str, resource) -> None:
    access_token_by_checksum(token_checksum(token))  # the cache entry, as the first (database) request fills it
    token_cache.resource_by_uri(resource.uri)
    assert check(token, resource) is not None
    assert token_cache._decoded._entries.get(TOKEN_PREFIX + token_checksum(token)) is not None


def test_a_warm_check_does_not_decode_the_token_again(redis_token_cache, token, resource, monkeypatch):
    from django.core.cache import caches

    warm(token, resource)
    backend_class = type(caches["default"])
    counted = CountingLoads()
    monkeypatch.setattr(backend_class, "loads", lambda self, raw: counted(raw))
    principals = [check(token, resource) for _ in range(3)]
    assert all(principal is not None for principal in principals)
    assert counted.calls == 0  # the token and the resource generation came from the kept decodes
    users = {id(principal.user) for principal in principals}
    assert len(users) == 3  # each request its own user object


def test_a_revoked_token_is_refused_at_once_although_kept_decoded(redis_token_cache, token, resource):
    warm(token, resource)
    get_access_token_model().objects.get(token_checksum=token_checksum(token)).revoke()
    assert check(token, resource) is None  # -> the database path, which answers 401


def test_a_deactivated_user_is_refused_at_once_although_kept_decoded(redis_token_cache, token, resource, user):
    warm(token, resource)
    user.is_active = False
    user.save()
    assert check(token, resource) is None


def test_a_changed_token_is_decoded_anew(redis_token_cache, token, resource):
    """A scope added on the row (admin): the old decode is not used, the new row is."""
    warm(token, resource)
    row = get_access_token_model().objects.get(token_checksum=token_checksum(token))
    row.scope = "mcp extra"
    row.save()
    assert check(token, resource) is None  # tombstone: the database path answers
    from django.core.cache import cache

    cache.delete(TOKEN_PREFIX + token_checksum(token))  # the tombstone expired
    access_token_by_checksum(token_checksum(token))
    principal = check(token, resource)
    assert principal is not None and principal.scopes == frozenset({"mcp", "extra"})


@pytest.mark.parametrize(
    ("size", "errors"),
    [(0, set()), (1024, set()), (-1, {"mcp_oauth.E070"}), ("1024", {"mcp_oauth.E070"}), (True, {"mcp_oauth.E070"})],
)
def test_a_size_that_is_not_a_count_is_a_system_check_error(settings, size, errors):
    from django.core.checks import run_checks

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DECODED_TOKEN_ENTRIES": size}
    assert {m.id for m in run_checks() if m.id == "mcp_oauth.E070"} == errors
