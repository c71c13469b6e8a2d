"""Attack/review tests of commit 4713acb (mcp_oauth.authorization_server.user_data.lifecycle.revoke_on_delete locks the user's
pending authorization codes, takes the SQLite write lock, then revokes and deletes the tokens).

The README promises: "Deleting an account or a client while one of its grants is in flight (a code
exchange, a refresh, a client_credentials grant) waits for that grant and deletes what it issued".

* ``test_a_plain_delete_waits_for_a_code_exchange_in_flight``: ``User.delete()`` outside any
  transaction, on PostgreSQL and on SQLite (the SQLite case is new: the project's own test of it
  runs on PostgreSQL only). Holds.
* ``test_the_admin_deletes_a_user_while_their_code_is_exchanged``: the canonical deletion, the
  admin's delete view. The admin reads the user (and collects the related rows) inside its own
  ``transaction.atomic`` before ``pre_delete`` runs. On SQLite, a transaction that has read cannot
  wait for the write lock (SQLite answers SQLITE_BUSY at once instead of calling the busy handler,
  to avoid a deadlock), so ``take_write_lock()`` in ``pre_delete`` comes too late: the deletion
  fails with "database is locked" (a 500 in the admin) instead of waiting. Holds now that the
  reference settings use ``transaction_mode = "IMMEDIATE"`` on SQLite (the write lock is taken at
  BEGIN, under the busy timeout).
* ``test_the_admin_can_delete_a_user_who_consented`` / ``test_a_staff_user_without_the_permissions_is_still_refused``:
  issues 28 and 34 (the consent and DOT token screens no longer block their owner's cascade).
* ``test_a_deletion_that_locks_the_codes_first_makes_the_exchange_lose``: the other order
  (the deletion holds the code's row before the exchange deletes it): the exchange answers
  ``invalid_grant`` and nothing it wrote survives (PostgreSQL). Holds.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection, connections
from django.test import Client
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from mcp_oauth.models import Consent
from tests.support.oauth_helpers import get_code, token_request
from tests.support.races import race_inside_grant, someone_waits

pytestmark = pytest.mark.django_db(transaction=True)


def _settle() -> float:
    # PostgreSQL shows the lock wait (someone_waits); SQLite does not: give the competitor a moment.
    return 10.0 if connection.vendor == "postgresql" else 2.0


def _exchange(app, code, verifier):
    def exchange():
        try:
            return token_request(Client(), app, code, verifier)
        finally:
            connections.close_all()

    return exchange


def _nothing_left(django_user_model, user_pk) -> None:
    assert not django_user_model.objects.filter(pk=user_pk).exists()
    assert not get_refresh_token_model().objects.filter(user_id=user_pk).exists()
    assert not get_access_token_model().objects.filter(user_id=user_pk).exists()
    assert not get_grant_model().objects.filter(user_id=user_pk).exists()


def test_a_plain_delete_waits_for_a_code_exchange_in_flight(
    client, user, resource, public_app, monkeypatch, django_user_model
):
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    pk = user.pk

    def delete():
        try:
            django_user_model.objects.get(pk=pk).delete()
            return "deleted"
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            return repr(exc)
        finally:
            connections.close_all()

    response, deletion = race_inside_grant(
        monkeypatch, _exchange(public_app, code, verifier), delete, settle_seconds=_settle()
    )
    assert deletion == "deleted"
    assert response.status_code in (200, 400), response.content
    _nothing_left(django_user_model, pk)


def test_the_admin_deletes_a_user_while_their_code_is_exchanged(
    client, user, resource, public_app, monkeypatch, django_user_model
):
    """The admin's delete view waits for the exchange in flight and deletes what it issued."""
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    admin_client = Client(raise_request_exception=True)
    admin_client.force_login(admin)
    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    pk = user.pk

    def delete():
        try:
            response = admin_client.post(f"/admin/auth/user/{pk}/delete/", {"post": "yes"})
            return response.status_code
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            return repr(exc)
        finally:
            connections.close_all()

    response, deletion = race_inside_grant(
        monkeypatch, _exchange(public_app, code, verifier), delete, settle_seconds=_settle()
    )
    assert deletion == 302, f"the admin's deletion failed instead of waiting for the exchange: {deletion}"
    assert response.status_code in (200, 400), response.content
    _nothing_left(django_user_model, pk)


def test_the_admin_can_delete_a_user_who_consented(client, user, resource, public_app, django_user_model):
    """An account whose owner once approved a client (a consent, a code, tokens) is deleted by a
    superuser in the admin: the consent and DOT's token screens refuse a *direct* delete (revoke
    instead), not the cascade of their owner (issues 28, 34; mcp_oauth.admin.cascade)."""
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    admin_client = Client()
    admin_client.force_login(admin)
    client.force_login(user)
    get_code(client, public_app)
    assert Consent.objects.filter(user=user).exists()
    tokens = token_request(Client(), public_app, *get_code(client, public_app)[:2]).json()
    assert get_refresh_token_model().objects.filter(user=user).exists()
    confirm = admin_client.get(f"/admin/auth/user/{user.pk}/delete/")
    assert confirm.status_code == 200
    # The confirmation lists what goes with the account, never a token's value.
    assert b"AccessToken #" in confirm.content and b"RefreshToken #" in confirm.content
    for value in (tokens["access_token"], tokens["refresh_token"]):
        assert value.encode() not in confirm.content
    response = admin_client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302, response.status_code
    assert not django_user_model.objects.filter(pk=user.pk).exists()
    assert not Consent.objects.filter(user_id=user.pk).exists()


def test_a_staff_user_without_the_permissions_is_still_refused(client, user, resource, public_app, django_user_model):
    """Staff with ``auth.delete_user`` only: the cascade includes consents and tokens they may not
    delete, so the admin refuses (403), and the consent and tokens stay. Given the permissions, it works."""
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("staff", "staff@example.com", "pw", is_staff=True)
    staff.user_permissions.add(
        Permission.objects.get(codename="delete_user"), Permission.objects.get(codename="view_user")
    )
    staff_client = Client()
    staff_client.force_login(staff)
    client.force_login(user)
    token_request(Client(), public_app, *get_code(client, public_app)[:2])
    response = staff_client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert django_user_model.objects.filter(pk=user.pk).exists()
    assert Consent.objects.filter(user=user).exists()
    assert get_access_token_model().objects.filter(user=user).exists()
    # Direct deletion on the consent screen stays refused for a superuser too (revoke instead).
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    root_client = Client()
    root_client.force_login(root)
    consent = Consent.objects.get(user=user)
    assert root_client.get(f"/admin/mcp_oauth/consent/{consent.pk}/delete/").status_code == 403
    staff.user_permissions.add(
        *Permission.objects.filter(
            codename__in=[
                "delete_consent",
                "delete_accesstoken",
                "delete_refreshtoken",
                "delete_grant",
                "delete_idtoken",
            ]
        )
    )
    staff = django_user_model.objects.get(pk=staff.pk)
    staff_client.force_login(staff)
    response = staff_client.post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not django_user_model.objects.filter(pk=user.pk).exists()


def test_a_deletion_that_locks_the_codes_first_makes_the_exchange_lose(
    client, user, resource, public_app, monkeypatch, django_user_model
):
    """The deletion holds the pending code's row (its pre_delete ran) when the exchange reaches
    its DELETE of the code: the exchange waits, then finds the code gone (invalid_grant), and the
    tokens it had inserted roll back: nothing of the user is left."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks: PostgreSQL")
    from mcp_oauth.authorization_server.user_data import erasure  # revoke_on_delete runs erase_user_data

    client.force_login(user)
    code, verifier, _ = get_code(client, public_app)
    pk = user.pk
    locked, release = threading.Event(), threading.Event()
    original = erasure.revoke_user_grants

    def held_revoke(instance, *args, **kwargs):
        locked.set()  # the codes are locked (revoke_on_delete locks them before this call)
        assert release.wait(timeout=30)
        return original(instance, *args, **kwargs)

    monkeypatch.setattr(erasure, "revoke_user_grants", held_revoke)

    def delete():
        try:
            django_user_model.objects.get(pk=pk).delete()
            return "deleted"
        finally:
            connections.close_all()

    with ThreadPoolExecutor(max_workers=2) as pool:
        deleting = pool.submit(delete)
        assert locked.wait(timeout=30)
        exchanging = pool.submit(_exchange(public_app, code, verifier))
        for _ in range(200):
            if exchanging.done() or someone_waits():
                break
            threading.Event().wait(0.05)
        release.set()
        assert deleting.result(timeout=60) == "deleted"
        response = exchanging.result(timeout=60)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_grant"
    _nothing_left(django_user_model, pk)
