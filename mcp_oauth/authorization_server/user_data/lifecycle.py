"""Account lifecycle: a user's MCP grants end with their password, their activity or their account.

Receivers on the user model (connected in :meth:`mcp_oauth.apps.MCPOAuthConfig.ready`):

* ``pre_save`` reads the stored ``password`` and ``is_active``; ``post_save`` compares:
  a changed password (``set_password`` + ``save``, the admin, ``changepassword``, password
  reset) or ``is_active`` turned false revokes the user's tokens and consents
  (:func:`mcp_oauth.authorization_server.tokens.grants.revoke_user_grants`, reasons ``password_changed`` /
  ``deactivated``; RFC 9700 §4.14.2, OAuth 2.1 §4.3.3: "revoke on password change"). Django's
  re-hash of the same password when the user signs in (a new hasher or more iterations) is not a
  change (:func:`is_password_rehash`).
* ``pre_delete`` erases the user's data before the user is deleted (reason ``deleted``;
  :mod:`mcp_oauth.authorization_server.user_data.erasure`): revoked first, so caches hear about the tokens;
  the audit log keeps its events, anonymised.

``user_logged_in`` is not used: logging in changes neither. Saves with ``update_fields``
that name neither field (``last_login``) cost no query.

A client's deletion (the admin, ``Application.delete()``) waits for the grants of that client in
flight, then deletes the tokens they committed (:func:`settle_client_deletion`), so that the
deletion does not fail at commit on rows Django had not collected.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import router, transaction
from django.db.models.signals import post_save, pre_delete, pre_save
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.authorization_server.tokens.rotation import take_write_lock
from mcp_oauth.authorization_server.user_data.erasure import erase_user_data
from mcp_oauth.models import RefreshGeneration

WATCHED = frozenset({"password", "is_active"})


def remember_credentials(sender, instance, raw=False, update_fields=None, **kwargs) -> None:
    """``pre_save``: keep the stored password and ``is_active`` on the instance."""
    instance._mcp_stored_credentials = None
    if raw or instance.pk is None or (update_fields is not None and not WATCHED & set(update_fields)):
        return
    instance._mcp_stored_credentials = (
        sender._default_manager.filter(pk=instance.pk).values_list("password", "is_active").first()
    )


def is_password_rehash(instance: Any, update_fields: Iterable[str] | None) -> bool:
    """Whether this save is Django's re-hash of the same password on sign-in.

    ``AbstractBaseUser.check_password`` upgrades a stored hash (a new preferred hasher, more
    iterations) through a setter that calls ``set_password``, clears ``_password`` ("Password hash
    upgrades shouldn't be considered password changes") and saves with
    ``update_fields=["password"]``. A real change through ``set_password`` still carries the raw
    password in ``_password`` until the save ends; a hash assigned by hand and saved whole names no
    ``update_fields``. Both of those revoke."""
    return (
        update_fields is not None
        and frozenset(update_fields) == frozenset({"password"})
        and getattr(instance, "_password", None) is None
    )


def revoke_on_credentials_change(sender, instance, created=False, raw=False, update_fields=None, **kwargs) -> None:
    """``post_save``: revoke the user's grants when the password changed or the account was deactivated
    (Django's re-hash of the same password on sign-in is no change: :func:`is_password_rehash`)."""
    stored = getattr(instance, "_mcp_stored_credentials", None)
    instance._mcp_stored_credentials = None
    if raw or created or stored is None:
        return
    password, was_active = stored
    if getattr(instance, "is_active", True) is False and was_active:
        revoke_user_grants(instance, reason="deactivated")
    elif getattr(instance, "password", password) != password and not is_password_rehash(instance, update_fields):
        revoke_user_grants(instance, reason="password_changed")


def revoke_on_delete(sender, instance, **kwargs) -> None:
    """``pre_delete``: erase the user's data (:func:`~mcp_oauth.authorization_server.user_data.erasure.erase_user_data`,
    reason ``deleted``) before the account goes.

    First the user's pending authorization codes are locked: a code exchange in flight holds its
    code's row until it commits, so the deletion waits for it (later exchanges find the code gone:
    ``invalid_grant``). Then the grants are revoked, and the user's tokens deleted here: Django
    collected the rows to delete before sending ``pre_delete``, and an exchange or a refresh in
    flight (which :func:`revoke_user_grants` waited for) committed a new pair after that; left to
    the deletion, those rows would fail its foreign-key check at commit (the account deletion
    would fail). The rest (bookkeeping, sessions, tasks, the ``elicitation`` app's rows, the audit
    rows' anonymisation) goes in the same transaction."""
    if instance.pk is None:
        return
    erase_user_data(instance, reason="deleted")


#: Primary keys of clients whose deletion :func:`lock_clients` and :func:`delete_client_tokens`
#: already settled in bulk (:func:`clients_settled`): their ``pre_delete`` does nothing more.
_settled: ContextVar[frozenset] = ContextVar("mcp_oauth_settled_clients", default=frozenset())


@contextmanager
def clients_settled(pks: Iterable[Any]) -> Iterator[None]:
    """Within the block, deleting the clients ``pks`` skips :func:`settle_client_deletion`: the caller
    already ran :func:`lock_clients` and :func:`delete_client_tokens` on them in this transaction."""
    token = _settled.set(_settled.get() | frozenset(pks))
    try:
        yield
    finally:
        _settled.reset(token)


def lock_clients(application_model, pks: list[Any]) -> None:
    """Steps 1-3 of :func:`settle_client_deletion` for many clients at once (in the caller's transaction):
    lock their pending codes, their refresh-token generations and their rows."""
    take_write_lock()
    list(get_grant_model().objects.select_for_update().filter(application_id__in=pks).order_by("pk").values_list("pk"))
    families = get_refresh_token_model().objects.filter(application_id__in=pks, token_family__isnull=False)
    list(
        RefreshGeneration.objects.select_for_update()
        .filter(token_family__in=families.values("token_family"))
        .order_by("created_at", "pk")
        .values_list("pk")
    )
    list(application_model.objects.select_for_update().filter(pk__in=pks).order_by("pk").values_list("pk"))


def delete_client_tokens(pks: list[Any]) -> None:
    """Step 4 of :func:`settle_client_deletion` for many clients: delete their refresh and access tokens."""
    get_refresh_token_model().objects.filter(application_id__in=pks).delete()
    get_access_token_model().objects.filter(application_id__in=pks).delete()


def settle_client_deletion(sender, instance, **kwargs) -> None:
    """``pre_delete`` of a client: wait for its grants in flight, then delete the tokens they committed.

    Django collects the rows a deletion removes before it sends ``pre_delete``; a grant of this
    client that commits afterwards would leave rows pointing at the deleted client, and the
    deletion would fail at commit (``IntegrityError``). Here, in the deletion's transaction, and
    in this order (each lock waits for the grants that hold it; none waits for the deletion):

    1. the client's pending authorization codes are locked (a code exchange in flight holds its
       code's row until it commits; later exchanges find the code gone: ``invalid_grant``);
    2. the generations of the client's refresh-token families are locked, oldest first, as
       :func:`~mcp_oauth.authorization_server.tokens.rotation.revoke_family` locks them (a rotation or
       grace request in flight holds one; later ones find the generation gone);
    3. the client's row is locked (a ``client_credentials`` grant that commits later waits for the
       deletion at its foreign-key check, then fails: ``invalid_grant``);
    4. the client's refresh and access tokens that exist now are deleted.
    """
    if instance.pk is None or instance.pk in _settled.get():
        return
    RefreshToken, AccessToken = get_refresh_token_model(), get_access_token_model()
    with transaction.atomic(using=router.db_for_write(type(instance))):
        take_write_lock()
        list(get_grant_model().objects.select_for_update().filter(application_id=instance.pk).values_list("pk"))
        families = RefreshToken.objects.filter(application_id=instance.pk, token_family__isnull=False).values(
            "token_family"
        )
        list(
            RefreshGeneration.objects.select_for_update()
            .filter(token_family__in=families)
            .order_by("created_at", "pk")
            .values_list("pk")
        )
        list(type(instance).objects.select_for_update().filter(pk=instance.pk).values_list("pk"))
        RefreshToken.objects.filter(application_id=instance.pk).delete()
        AccessToken.objects.filter(application_id=instance.pk).delete()


def connect_client(application_model) -> None:
    """Connect :func:`settle_client_deletion` for ``application_model`` (idempotent)."""
    pre_delete.connect(
        settle_client_deletion,
        sender=application_model,
        dispatch_uid="mcp_oauth.authorization_server.user_data.lifecycle.client_pre_delete",
    )


def connect(user_model) -> None:
    """Connect the receivers for ``user_model`` (idempotent)."""
    pre_save.connect(
        remember_credentials,
        sender=user_model,
        dispatch_uid="mcp_oauth.authorization_server.user_data.lifecycle.pre_save",
    )
    post_save.connect(
        revoke_on_credentials_change,
        sender=user_model,
        dispatch_uid="mcp_oauth.authorization_server.user_data.lifecycle.post_save",
    )
    pre_delete.connect(
        revoke_on_delete,
        sender=user_model,
        dispatch_uid="mcp_oauth.authorization_server.user_data.lifecycle.pre_delete",
    )
