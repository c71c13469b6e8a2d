"""Attack/review tests of commit 03e5ea4 (mcp_oauth.resource_server.decoded: token-cache entries
kept decoded per process next to their bytes; a copy per request).

What must hold: the cached bearer check never accepts what the database path would refuse (the
entry is compared with the bytes Redis answers in *this* request), and no request sees what an
earlier request did to its objects.

Findings, each failing first and fixed since (the tests now pass):

* ``test_nested_json_in_a_kept_entry_is_not_shared_between_requests``: the copy is one level
  deep for list/dict/set values, so a JSON value with nested containers (a dict in a list, a list
  in a dict) is shared by every request of the worker that uses the kept entry, and by the kept
  entry itself: what a request changes in it (without saving) is seen by the next requests.
  ``detached_copy`` promises "sharing no mutable state". With the stock DOT models and
  ``auth.User`` the entries have no nested JSON (``AccessToken.resource`` is a list of strings),
  so this bites a site with a swapped user/application/token model (a ``JSONField`` of settings,
  a profile in ``fields_cache``), or values of other mutable types (``bytearray``, a list
  subclass, a custom field's value object), which are not copied at all.
* ``test_a_kept_entry_with_a_back_reference_is_decoded``: ``_Copier`` recurses through
  ``fields_cache`` without a memo; an entry whose graph has a cycle (a one-to-one loaded with the
  row) raises RecursionError in ``decode``: never kept, and the cached check of that token raises
  (500) on every request. Not reachable with the stock ``_load_token`` (two forward FKs).
* ``test_mutable_values_of_other_types_are_not_shared``: values that are not exactly list/dict/set
  (OrderedDict, list subclasses, bytearray, value objects of custom fields) are shared by all copies.
* ``test_an_adapter_patched_after_the_first_request_is_honoured``: ``_default_authentication``
  now remembers per adapter class whether it keeps the default ``authenticate_request``; an
  override installed on the class after the first request (``mock.patch.object``, a plugin) is
  never seen, and the cached path keeps accepting tokens the override refuses.

Held (PASS): revocation, deactivation, scope/resource/expiry change, client deletion and user
deletion refused at once although the entry was kept; re-cached entries decoded anew; state added
to a request's objects (fields_cache, prefetches, permission caches, attributes, JSON appends)
not seen by the next request; concurrent decode/evict from threads; garbage bytes never kept;
``DECODED_TOKEN_ENTRIES = 0``.
"""

from __future__ import annotations

import asyncio
import pickle
import random
import threading
from datetime import timedelta

import pytest
from django.core.cache import caches
from django.db.models import prefetch_related_objects
from django.test import AsyncRequestFactory
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.models import ClientProfile
from mcp_oauth.resource_server import cache as token_cache
from mcp_oauth.resource_server.authentication import authenticate_bearer_cached
from mcp_oauth.resource_server.cache import TOKEN_PREFIX, access_token_by_checksum, token_checksum
from mcp_oauth.resource_server.decoded import DecodedEntries
from tests.mcp_oauth.resource_server.test_decoded import check, redis_token_cache, token  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db(transaction=True)


def kept(token: str):
    return token_cache._decoded._entries.get(TOKEN_PREFIX + token_checksum(token))


def warm(token: str, resource) -> None:
    """Fill the cache entry (as the first, database, request does), then use it twice through the
    cached path: the second use comes from the kept decode."""
    access_token_by_checksum(token_checksum(token))
    token_cache.resource_by_uri(resource.uri)
    assert check(token, resource) is not None
    assert kept(token) is not None
    assert check(token, resource) is not None


def row(token: str):
    return get_access_token_model().objects.get(token_checksum=token_checksum(token))


def recache(token: str) -> None:
    """The tombstone expired and a database request cached the row again."""
    caches["default"].delete(TOKEN_PREFIX + token_checksum(token))
    access_token_by_checksum(token_checksum(token))


# --- 1. nothing refused by the database is accepted from a kept decode ---------------------------


def test_a_narrowed_scope_is_refused_at_once_and_after_it_is_cached_again(redis_token_cache, token, resource):
    warm(token, resource)
    access_token = row(token)
    access_token.scope = "profile"
    access_token.save()
    assert check(token, resource) is None  # tombstone
    recache(token)
    assert check(token, resource) is None  # new bytes, decoded anew: insufficient_scope
    assert kept(token) is not None and "profile" == pickle.loads(kept(token)[0]).scope


def test_a_token_rebound_to_another_resource_is_refused(redis_token_cache, token, resource):
    warm(token, resource)
    access_token = row(token)
    access_token.resource = ["https://elsewhere.example/mcp"]
    access_token.save()
    assert check(token, resource) is None
    recache(token)
    assert check(token, resource) is None


def test_an_expiry_moved_into_the_past_is_refused(redis_token_cache, token, resource):
    warm(token, resource)
    access_token = row(token)
    access_token.expires = timezone.now() - timedelta(seconds=1)
    access_token.save()
    assert check(token, resource) is None


def test_a_kept_entry_expires_with_its_token(redis_token_cache, token, resource, monkeypatch):
    """The kept decode carries ``expires``; expiry is judged on every request, not at decode."""
    warm(token, resource)
    later = timezone.now() + timedelta(hours=2)
    monkeypatch.setattr("django.utils.timezone.now", lambda: later)
    assert check(token, resource) is None


def test_a_deleted_client_and_a_deleted_user_are_refused(
    redis_token_cache, resource, user, other_user, public_app, mint_token
):
    Application = get_application_model()
    other_app = Application.objects.create(
        name="other",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    of_client = mint_token(user, other_app, "mcp", resource.uri)
    of_user = mint_token(other_user, public_app, "mcp", resource.uri)
    survivor = mint_token(user, public_app, "mcp", resource.uri)
    for minted in (of_client, of_user, survivor):
        warm(minted, resource)
    other_app.delete()
    other_user.delete()
    assert check(of_client, resource) is None
    assert check(of_user, resource) is None
    assert check(survivor, resource) is not None


def test_a_changed_client_drops_the_kept_entry_and_a_reactivated_user_stays_out(
    redis_token_cache, token, resource, user, public_app
):
    warm(token, resource)
    public_app.name = "renamed"
    public_app.save()
    assert check(token, resource) is None  # tombstone: the database path answers
    recache(token)
    principal = check(token, resource)
    assert principal is not None and principal.application.name == "renamed"
    user.is_active = False
    user.save()
    assert check(token, resource) is None
    recache(token)  # deactivation revoked (deleted) the token: nothing is cached again
    assert check(token, resource) is None
    user.is_active = True
    user.save()
    recache(token)
    assert check(token, resource) is None  # reactivation does not bring the kept decode back
    assert kept(token) is None


def test_an_entry_of_another_token_with_the_same_bytes_is_not_mixed_up(
    redis_token_cache, resource, user, other_user, public_app, mint_token
):
    """Kept decodes are per key: one user's token never answers with another user's principal."""
    alice = mint_token(user, public_app, "mcp", resource.uri)
    bob = mint_token(other_user, public_app, "mcp", resource.uri)
    warm(alice, resource)
    warm(bob, resource)
    for _ in range(3):
        assert check(alice, resource).user.pk == user.pk
        assert check(bob, resource).user.pk == other_user.pk


# --- 2. no state leaks between requests through the kept objects -------------------------------


def test_what_a_request_adds_to_its_objects_is_not_seen_by_the_next(
    redis_token_cache, token, resource, user, public_app, django_user_model
):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="staff")
    user.groups.add(group)
    ClientProfile.objects.create(application=public_app, metadata={"contacts": ["a@example.com"]})
    warm(token, resource)

    first = check(token, resource)
    first.user.first_name = "Mallory"
    first.user.get_all_permissions()  # ModelBackend caches _perm_cache on the instance
    prefetch_related_objects([first.user], "groups")  # _prefetched_objects_cache
    first.application.mcp_profile.metadata["contacts"].append("evil@example.com")  # fields_cache
    first.access_token.resource.append("https://elsewhere.example/mcp")
    first.access_token.extra = "attribute"
    first.access_token._state.fields_cache["user"] = django_user_model(pk=999999, username="x")
    first.access_token._state.db = "other"

    second = check(token, resource)
    assert second.user.first_name == "" and second.user.pk == user.pk
    assert "_perm_cache" not in second.user.__dict__
    assert "_prefetched_objects_cache" not in second.user.__dict__
    assert "mcp_profile" not in second.application._state.fields_cache
    assert second.application.mcp_profile.metadata == {"contacts": ["a@example.com"]}
    assert second.access_token.resource == [resource.uri]
    assert not hasattr(second.access_token, "extra")
    assert second.access_token.user.pk == user.pk and second.access_token._state.db == "default"
    assert second.user is second.access_token.user and second.application is second.access_token.application


def test_nested_json_in_a_kept_entry_is_not_shared_between_requests(resource, user, public_app, mint_token):
    """Fixed (containers are copied whole). Was: one-level copies. The token's user carries a JSON value with nested containers (what
    a JSONField of a swapped user model holds: a dict whose values are lists and dicts); a request
    appends to a nested list: the next requests of the worker, and the kept entry itself, see it."""
    raw_token = mint_token(user, public_app, "mcp", resource.uri)
    access_token = (
        get_access_token_model()
        .objects.select_related("application", "user")
        .get(token_checksum=token_checksum(raw_token))
    )
    access_token.user.settings = {"allowed_tools": ["read"], "limits": {"calls": 10}}  # a JSONField's value
    raw = pickle.dumps(access_token)
    entries = DecodedEntries(lambda: 8)
    entries.decode("k", raw, pickle.loads)  # kept
    one = entries.decode("k", raw, pickle.loads)  # a request's copy
    one.user.settings["allowed_tools"].append("delete_everything")
    one.user.settings["limits"]["calls"] = 10**9
    two = entries.decode("k", raw, pickle.loads)  # the next request
    assert two.user.settings == {"allowed_tools": ["read"], "limits": {"calls": 10}}, (
        "a nested JSON value changed by one request is seen by the next"
    )


def test_a_kept_entry_with_a_back_reference_is_decoded(resource, user, public_app, mint_token):
    """Fixed (a cycle is not kept: decoded every time). Was: ``_Copier`` follows ``fields_cache`` recursively without remembering what it has
    visited. An entry whose graph has a cycle (a one-to-one loaded with the row: select_related
    or an accessed reverse one-to-one sets the back-reference, e.g. application.mcp_profile
    .application) makes ``decode`` raise RecursionError; the entry is then never kept, and the
    cached bearer check of that token raises on every request (a 500, where pickle.loads, used
    before the change, handles cycles). The stock ``_load_token`` (select_related of two foreign
    keys) makes no cycle; a swapped token model or a wider select_related does."""
    raw_token = mint_token(user, public_app, "mcp", resource.uri)
    ClientProfile.objects.create(application=public_app, metadata={"contacts": ["a@example.com"]})
    access_token = (
        get_access_token_model()
        .objects.select_related("application", "application__mcp_profile", "user")
        .get(token_checksum=token_checksum(raw_token))
    )
    assert access_token.application.mcp_profile.application is access_token.application  # the cycle
    raw = pickle.dumps(access_token)
    entries = DecodedEntries(lambda: 8)
    first = entries.decode("k", raw, pickle.loads)
    second = entries.decode("k", raw, pickle.loads)
    for decoded in (first, second):
        assert decoded.application.mcp_profile.metadata == {"contacts": ["a@example.com"]}
        assert decoded.application.mcp_profile.application is decoded.application


def test_mutable_values_of_other_types_are_not_shared(resource, user, public_app, mint_token):
    """Fixed (values of other types are not kept: decoded every time). Was: only exact list/dict/set values were copied; a list subclass (e.g. a custom field's
    value, a JSONField decoder's OrderedDict) or a bytearray is shared by every copy."""
    from collections import OrderedDict

    raw_token = mint_token(user, public_app, "mcp", resource.uri)
    access_token = (
        get_access_token_model()
        .objects.select_related("application", "user")
        .get(token_checksum=token_checksum(raw_token))
    )
    access_token.user.preferences = OrderedDict(theme="dark")  # what a custom field could hold
    raw = pickle.dumps(access_token)
    entries = DecodedEntries(lambda: 8)
    entries.decode("k", raw, pickle.loads)
    one = entries.decode("k", raw, pickle.loads)
    one.user.preferences["theme"] = "changed by a tool"
    two = entries.decode("k", raw, pickle.loads)
    assert two.user.preferences["theme"] == "dark"


# --- 3. concurrency, memory, bad bytes, size 0 --------------------------------------------------


def test_decode_and_evict_from_many_threads(resource, user, public_app, mint_token):
    """Eight threads decode 40 keys (two versions each) through a table of 8: every answer matches
    the bytes given, the table never exceeds its size, nothing raises."""
    raw_token = mint_token(user, public_app, "mcp", resource.uri)
    base = (
        get_access_token_model()
        .objects.select_related("application", "user")
        .get(token_checksum=token_checksum(raw_token))
    )
    versions = {}
    for n in range(40):
        for v in range(2):
            base.scope = f"k{n} v{v}"
            versions[(n, v)] = pickle.dumps(base)
    entries = DecodedEntries(lambda: 8)
    errors: list[BaseException] = []
    sizes: list[int] = []
    start = threading.Barrier(8)

    def work(seed: int) -> None:
        rnd = random.Random(seed)
        start.wait()
        try:
            for _ in range(1500):
                n, v = rnd.randrange(40), rnd.randrange(2)
                decoded = entries.decode(f"k{n}", versions[(n, v)], pickle.loads)
                assert decoded.scope == f"k{n} v{v}"
                sizes.append(len(entries))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:3]
    assert max(sizes) <= 8


def test_garbage_bytes_are_never_kept_and_good_bytes_work_again(redis_token_cache, token, resource):
    """A Redis answering garbage for the token's key: nothing is kept from it, and once it answers
    the real entry again the token works. (The garbage itself raises from the cached path, as it
    did before the change and as the synchronous ``cache.get`` does: a 500 for that token, not an
    acceptance.)"""
    warm(token, resource)
    key = TOKEN_PREFIX + token_checksum(token)
    good = kept(token)[0]
    client = caches["default"]._cache.get_client(write=True)
    client.set(caches["default"].make_key(key), b"\x80\x05garbage")
    with pytest.raises(Exception):  # noqa: B017 - UnpicklingError / ValueError, whatever pickle says
        check(token, resource)
    assert kept(token)[0] == good  # the old decode stays, under its own bytes only
    client.set(caches["default"].make_key(key), b"12")  # RedisSerializer: digits decode as an int
    with pytest.raises(AttributeError):
        check(token, resource)
    assert kept(token) is None  # a value that is not an entry drops what was kept under the key
    client.set(caches["default"].make_key(key), good)
    assert check(token, resource) is not None


def test_size_zero_keeps_nothing_and_still_accepts(redis_token_cache, token, resource, settings, monkeypatch):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "DECODED_TOKEN_ENTRIES": 0}
    access_token_by_checksum(token_checksum(token))
    token_cache.resource_by_uri(resource.uri)
    calls = {"n": 0}
    backend = type(caches["default"])
    loads = backend.loads

    def counted(self, raw):
        calls["n"] += 1
        return loads(self, raw)

    monkeypatch.setattr(backend, "loads", counted)
    for _ in range(3):
        assert check(token, resource) is not None
    assert len(token_cache._decoded) == 0
    assert calls["n"] == 6  # the generation and the token, every time


class SiteAdapter(DefaultMCPAdapter):
    """The site's adapter: the default one until a test patches it."""


def test_an_adapter_patched_after_the_first_request_is_honoured(
    redis_token_cache, token, resource, monkeypatch, settings
):
    """The contract of authenticate_bearer_cached: None for an adapter that overrides
    authenticate_request (the override runs on the thread path). The verdict must not be kept
    from the first request: a class patched later (a plugin, mock.patch in a site's tests) is
    honoured at once."""
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": f"{__name__}.SiteAdapter"}
    warm(token, resource)

    def deny(self, request, resource, required_scopes=()):
        raise AssertionError("the site's authenticate_request refuses everyone")

    monkeypatch.setattr(SiteAdapter, "authenticate_request", deny)
    assert check(token, resource) is None, "the cached path accepted a token behind the adapter's back"


def test_no_check_that_starts_after_the_revocation_accepts(redis_token_cache, token, resource):
    """Checks run without pause on an event loop of their own (the kept decode hot) while the
    token is revoked here: every check that started after ``revoke()`` returned is refused."""
    import time

    warm(token, resource)
    results: list[tuple[float, bool]] = []
    stop = threading.Event()

    async def hammer() -> None:
        while not stop.is_set():
            started = time.monotonic()
            request = AsyncRequestFactory().post("/mcp", headers={"Authorization": f"Bearer {token}"})
            batch = await asyncio.gather(*(authenticate_bearer_cached(request, resource.uri) for _ in range(8)))
            results.extend((started, principal is not None) for principal in batch)
            await asyncio.sleep(0)

    thread = threading.Thread(target=lambda: asyncio.run(hammer()))
    thread.start()
    try:
        time.sleep(0.5)
        row(token).revoke()
        revoked_at = time.monotonic()
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=30)
    before = [accepted for started, accepted in results if started < revoked_at]
    after = [accepted for started, accepted in results if started > revoked_at]
    assert before and any(before)  # the hammer ran, and was accepted while the token lived
    assert after and not any(after)
