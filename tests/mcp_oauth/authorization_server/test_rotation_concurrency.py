"""Concurrent refreshes of one refresh token on PostgreSQL: one generation, a working pair for the winner
and for up to ``REFRESH_TOKEN_GRACE_SIBLINGS`` (10) concurrent callers, ``invalid_grant`` (nothing revoked)
for the rest.

2, 10 and 100 requests present the same refresh token at once (at most 20 threads, so at
most 20 database connections, each request with its own test client). Needs
``DATABASE_URL=postgres://…``; skipped on SQLite, whose database-wide write lock hides the
race. Figures (requests, generations, working pairs, 5xx) are printed; run with ``-s``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.db import connection, connections
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import get_refresh_token_model

from mcp_oauth.models import AuditEvent, RefreshGeneration
from tests.support.oauth_helpers import bearer_works, get_code, token_request
from tests.support.races import password_change, race_against_transaction, race_inside_grant

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="needs PostgreSQL (DATABASE_URL=postgres://…)"),
]

MAX_THREADS = 20


def _json(response) -> tuple:
    try:
        return response.status_code, response.json()
    finally:
        connections.close_all()


def concurrent_refreshes(app, refresh_token: str, count: int) -> list:
    """``count`` refreshes of ``refresh_token`` released together (in batches of MAX_THREADS); their responses."""
    barrier = threading.Barrier(min(count, MAX_THREADS))

    def one(_):
        try:
            client = Client()
            try:
                barrier.wait(timeout=30)
            except threading.BrokenBarrierError:
                pass  # the last, smaller batch
            response = client.post(
                "/oauth/token",
                {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id},
            )
            return response.status_code, response.json()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=min(count, MAX_THREADS)) as pool:
        results = list(pool.map(one, range(count)))
    return results


@pytest.mark.parametrize("count", [2, 10, 100])
def test_concurrent_refreshes_make_one_generation(client, user, resource, public_app, count):
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    root = RefreshGeneration.objects.get()

    results = concurrent_refreshes(public_app, first["refresh_token"], count)

    statuses = [status for status, _ in results]
    server_errors = sum(1 for status in statuses if status >= 500)
    generations = RefreshGeneration.objects.filter(parent=root).count()
    pairs = [body for status, body in results if status == 200]
    live = set(get_refresh_token_model().objects.filter(revoked__isnull=True).values_list("token_checksum", flat=True))
    import hashlib

    working = sum(
        1
        for body in pairs
        if bearer_works(client, body["access_token"])
        and hashlib.sha256(body["refresh_token"].encode()).hexdigest() in live
    )
    print(
        f"\n{count}-way refresh: requests={count} generations={generations} working_pairs={working} "
        f"5xx={server_errors} statuses={sorted(set(statuses))}"
    )
    # One winner plus at most REFRESH_TOKEN_GRACE_SIBLINGS (10) siblings; the rest invalid_grant, nothing revoked.
    succeeded = min(count, 1 + 10)
    assert server_errors == 0
    assert statuses.count(200) == succeeded, [body for status, body in results if status != 200][:3]
    assert [body["error"] for status, body in results if status != 200] == ["invalid_grant"] * (count - succeeded)
    assert generations == 1
    assert RefreshGeneration.objects.filter(parent__parent=root).count() == 0
    assert working == succeeded
    assert len({body["access_token"] for body in pairs}) == succeeded
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
    # any one of the pairs refreshes on (and starts generation 3)
    again = client.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": pairs[-1]["refresh_token"], "client_id": public_app.client_id},
    )
    assert again.status_code == 200


def test_replay_after_the_window_revokes_the_family(client, user, resource, public_app):
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    results = concurrent_refreshes(public_app, first["refresh_token"], 10)
    assert [status for status, _ in results] == [200] * 10
    RefreshGeneration.objects.filter(rotated_at__isnull=False).update(rotated_at=timezone.now() - timedelta(seconds=61))
    replays = concurrent_refreshes(public_app, first["refresh_token"], 5)
    assert [(status, body["error"]) for status, body in replays] == [(400, "invalid_grant")] * 5
    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    assert not any(bearer_works(client, body["access_token"]) for _, body in results)
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE, detail__family_revoked=True).exists()


def test_many_two_way_races(client, user, resource, public_app):
    """The 2-way race, 25 times: the interleavings differ from round to round (read, rotate, validate, save)."""
    client.force_login(user)
    for _ in range(25):
        code, verifier, _ = get_code(client, public_app)
        first = token_request(client, public_app, code, verifier).json()
        results = concurrent_refreshes(public_app, first["refresh_token"], 2)
        assert [status for status, _ in results] == [200, 200], results
        assert all(bearer_works(client, body["access_token"]) for _, body in results)
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()


@pytest.mark.parametrize("replayed", ["refresh_token", "code"])
def test_a_replay_racing_a_rotation_revokes_the_rotated_in_pair(
    client, user, resource, public_app, monkeypatch, replayed
):
    """A replay (a refresh token outside the window, or the authorization code) while the family's
    current token is being rotated: the family is revoked with the pair that rotation issues (a
    rotated-in refresh token must not stay live and give grace siblings to the token it replaced)."""
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    [(status, second)] = concurrent_refreshes(public_app, first["refresh_token"], 1)
    assert status == 200
    long_ago = timezone.now() - timedelta(seconds=120)
    RefreshGeneration.objects.filter(rotated_at__isnull=False).update(rotated_at=long_ago)
    get_refresh_token_model().objects.filter(revoked__isnull=False).update(revoked=long_ago)

    def refresh(refresh_token):
        try:
            response = Client().post(
                "/oauth/token",
                {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": public_app.client_id},
            )
            return response.status_code, response.json()
        finally:
            connections.close_all()

    def replay():
        if replayed == "code":
            return _json(token_request(Client(), public_app, code, verifier))
        return refresh(first["refresh_token"])

    rotated, replay_status = race_inside_grant(monkeypatch, lambda: refresh(second["refresh_token"]), replay)

    assert (replay_status[0], replay_status[1]["error"]) == (400, "invalid_grant")
    assert rotated[0] in (200, 400)
    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    # The token the rotation replaced, within its window: nothing left to give a sibling in.
    again = refresh(second["refresh_token"])
    assert again == (400, {"error": "invalid_grant"})
    if rotated[0] == 200:
        assert not bearer_works(client, rotated[1]["access_token"])


def test_a_revocation_racing_a_rotation_is_no_deadlock(client, user, resource, public_app):
    """RFC 7009 revocation (DOT's ``RefreshToken.revoke()``: the refresh token's row, then its access
    token) while the same token is rotated: the rotation waits for it and answers ``invalid_grant``;
    neither side fails with a deadlock."""
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    RefreshToken = get_refresh_token_model()
    presented = RefreshToken.objects.get(revoked__isnull=True)

    [(status, body)] = race_against_transaction(
        lambda: RefreshToken.objects.select_for_update().get(pk=presented.pk),  # then revoked while the rotation waits
        lambda: concurrent_refreshes(public_app, first["refresh_token"], 1),
        then=lambda row: row.revoke(),
    )

    assert (status, body["error"]) == (400, "invalid_grant")
    assert not RefreshToken.objects.filter(revoked__isnull=True).exists()
    assert not bearer_works(client, first["access_token"])


def test_a_password_change_racing_a_rotation_leaves_no_grace_to_the_replaced_token(
    client, user, resource, public_app, monkeypatch
):
    """The user's grants are revoked (password change) while a refresh rotates their token: the pair
    the rotation issues loses its access token, and the token it replaced gets no grace sibling."""
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()

    [(status, rotated)], _ = race_inside_grant(
        monkeypatch, lambda: concurrent_refreshes(public_app, first["refresh_token"], 1), password_change(user)
    )
    assert status in (200, 400)
    if status == 200:
        assert not bearer_works(client, rotated["access_token"])
        [(status, body)] = concurrent_refreshes(public_app, rotated["refresh_token"], 1)
        assert (status, body["error"]) == (400, "invalid_grant")
    # The replaced token, within its window: nothing live left to give a sibling in.
    [(status, body)] = concurrent_refreshes(public_app, first["refresh_token"], 1)
    assert (status, body["error"]) == (400, "invalid_grant"), body


def test_a_password_change_racing_a_grace_sibling_revokes_it(client, user, resource, public_app, monkeypatch):
    """The user's grants are revoked while a grace request issues a sibling pair: the sibling is revoked too."""
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    [(status, _)] = concurrent_refreshes(public_app, first["refresh_token"], 1)
    assert status == 200

    [(status, sibling)], _ = race_inside_grant(
        monkeypatch, lambda: concurrent_refreshes(public_app, first["refresh_token"], 1), password_change(user)
    )
    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    if status == 200:
        assert not bearer_works(client, sibling["access_token"])
        [(status, body)] = concurrent_refreshes(public_app, sibling["refresh_token"], 1)
        assert (status, body["error"]) == (400, "invalid_grant")


@pytest.mark.parametrize("reason", ["deactivated", "password_changed"])
def test_a_grace_request_waiting_for_a_revocation_of_the_users_grants_issues_no_sibling(
    client, user, resource, public_app, reason
):
    """The user's grants are revoked (deactivation, password change) while a grace request for the
    replaced token is under way: the request has seen the successor generation alive, then waits
    for its row lock, which the revocation holds until it commits. Once it has the lock the
    successor's members are revoked: no sibling may be issued into it (it would be the user's only
    live pair, after the revocation)."""
    from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants

    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    [(status, _)] = concurrent_refreshes(public_app, first["refresh_token"], 1)
    assert status == 200
    [(status, body)] = race_against_transaction(
        lambda: revoke_user_grants(user, reason=reason),
        lambda: concurrent_refreshes(public_app, first["refresh_token"], 1),
    )

    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    assert (status, body.get("error")) == (400, "invalid_grant"), body


def deleting(model, pk) -> Callable[[], str]:
    """A competitor that deletes the ``model`` row ``pk`` (the admin's delete), then closes its connections."""

    def delete() -> str:
        try:
            model.objects.get(pk=pk).delete()
        finally:
            connections.close_all()
        return "deleted"

    return delete


def refresh_held_against(client, user, public_app, monkeypatch, grace: bool, competitor) -> tuple:
    """A refresh of a fresh pair's token (a grace refresh when ``grace``: the token was refreshed once
    already), held inside its transaction while ``competitor()`` runs (:func:`race_inside_grant`).

    :returns: ``((status, body) of the refresh, competitor())``.
    """
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    first = token_request(client, public_app, code, verifier).json()
    if grace:
        [(status, _)] = concurrent_refreshes(public_app, first["refresh_token"], 1)
        assert status == 200
    [refreshed], result = race_inside_grant(
        monkeypatch, lambda: concurrent_refreshes(public_app, first["refresh_token"], 1), competitor
    )
    return refreshed, result


@pytest.mark.parametrize("grace", [False, True], ids=["rotation", "grace sibling"])
def test_a_client_deleted_while_its_token_is_refreshed_gives_no_server_error(
    client, user, resource, public_app, monkeypatch, grace
):
    """The client is deleted (admin) while a refresh of one of its tokens is about to commit: the
    deletion waits for the refresh (mcp_oauth.authorization_server.user_data.lifecycle.settle_client_deletion locks the client's
    generations), then deletes the pair it issued too; it never fails on rows it had not collected."""
    from oauth2_provider.models import get_access_token_model, get_application_model

    (status, body), deletion = refresh_held_against(
        client, user, public_app, monkeypatch, grace, deleting(get_application_model(), public_app.pk)
    )
    assert deletion == "deleted"
    assert status == 200, (status, body)  # it committed first; the deletion waited for it
    assert not get_application_model().objects.filter(pk=public_app.pk).exists()
    assert not get_refresh_token_model().objects.filter(application_id=public_app.pk).exists()
    assert not get_access_token_model().objects.filter(application_id=public_app.pk).exists()
    assert not bearer_works(client, body["access_token"])


def test_a_client_credentials_grant_racing_the_clients_deletion_gets_invalid_grant(client, service, monkeypatch):
    """A ``client_credentials`` grant that commits after the client's deletion locked the client's
    row waits for the deletion at its foreign-key check, then fails: 400 ``invalid_grant``, not 500."""
    from oauth2_provider.models import get_access_token_model, get_application_model

    from tests.support.oauth_helpers import basic

    app, secret = service

    def grant():
        try:
            return Client().post(
                "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(app.client_id, secret)
            )
        finally:
            connections.close_all()

    response, deletion = race_inside_grant(
        monkeypatch, grant, deleting(get_application_model(), app.pk), settle_seconds=2.0
    )
    assert deletion == "deleted"
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert response.json()["error"] == "invalid_grant"
    assert not get_access_token_model().objects.filter(application_id=app.pk).exists()


@pytest.mark.parametrize("grace", [False, True], ids=["rotation", "grace sibling"])
def test_a_user_deleted_while_their_token_is_refreshed_is_deleted(
    client, user, resource, public_app, monkeypatch, grace
):
    """A user deletes their account while their client refreshes: the deletion waits for the
    refresh (mcp_oauth.authorization_server.user_data.lifecycle revokes the grants under the generations' locks) and then deletes
    the pair the refresh issued too, instead of failing at commit on rows it had not collected."""
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model

    (status, body), deletion = refresh_held_against(
        client, user, public_app, monkeypatch, grace, deleting(get_user_model(), user.pk)
    )
    assert deletion == "deleted"
    assert status in (200, 400), (status, body)
    assert not get_refresh_token_model().objects.filter(user_id=user.pk).exists()
    assert not get_access_token_model().objects.filter(user_id=user.pk).exists()


def test_a_user_deleted_while_their_code_is_exchanged_is_deleted(client, user, resource, public_app, monkeypatch):
    """A user deletes their account while their client exchanges its authorization code: the
    deletion waits for the exchange (mcp_oauth.authorization_server.user_data.lifecycle locks the user's pending codes, as the
    exchange does) and deletes the pair it issued too, instead of failing at commit on rows it had
    not collected."""
    from django.contrib.auth import get_user_model
    from oauth2_provider.models import get_access_token_model

    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)

    def exchange():
        try:
            return token_request(Client(), public_app, code, verifier)
        finally:
            connections.close_all()

    response, deletion = race_inside_grant(monkeypatch, exchange, deleting(get_user_model(), user.pk))
    assert deletion == "deleted"
    assert response.status_code in (200, 400), response.content
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert not get_refresh_token_model().objects.filter(user_id=user.pk).exists()
    assert not get_access_token_model().objects.filter(user_id=user.pk).exists()
