"""Refresh-token rotation that is single-winner and forgiving (RFC 9700 §4.14.2, OAuth 2.1 §4.3.1).

DOT rotates a refresh token by revoking it and minting a new pair; two concurrent refreshes
of one token then give ``[200, 400 invalid_grant]`` and the second one, taken for a reuse,
revokes the whole family — the winner's fresh pair included. DOT's grace period cannot help
once tokens are stored hashed (it would have to hand back the stored value). This module
replaces the refresh branch of token saving:

* **Single winner.** Every refresh token belongs to a
  :class:`~mcp_oauth.models.RefreshGeneration`. Saving a refreshed pair claims the presented
  token's generation with a compare-and-set (``UPDATE … SET rotated_at = now WHERE id = …
  AND rotated_at IS NULL``, which takes the row lock; a concurrent claim waits for it and then
  finds the generation rotated): the first request creates the successor generation (``parent``
  is unique, so the database refuses a second one too), revokes every member of the old
  generation (refresh tokens marked revoked, their access tokens deleted, as DOT does) and
  issues the new pair. A request that loses the claim reads the generation under its row lock
  (``SELECT … FOR UPDATE``) and takes the grace or reuse path below. The winner's statements
  are written by hand (:mod:`.rotation_sql`, on :mod:`mcp_oauth.shared.db`): one ``DELETE … RETURNING`` removes the members'
  access tokens (``post_delete`` is sent to its receivers, so the token cache forgets them),
  having locked the members' rows first where the database has row locks (refresh token before
  access token, the order of DOT's ``revoke()``: a concurrent revocation is waited for, not a
  deadlock), one ``UPDATE`` revokes the members, and the new rows are single ``INSERT`` statements.
  On PostgreSQL all of that after the claim is one statement (:mod:`.rotation_statement`), the
  grant's audit event included, when nothing asks for the statements one by one (see there).
* **Grace window.** A request that arrives after the rotation, presenting a token the
  rotation revoked, within ``MCP_OAUTH["REFRESH_TOKEN_GRACE_SECONDS"]`` (default 60) of it,
  while the successor generation is still the newest and alive, gets a *sibling*: a new
  access/refresh pair of fresh random values (stored hashed like any token) that belongs to
  the successor generation and dies with it. Nothing is revoked and no plaintext token is
  kept anywhere. A generation gets at most ``MCP_OAUTH["REFRESH_TOKEN_GRACE_SIBLINGS"]``
  (default 10) siblings, counted under the successor's row lock; a grace request past the
  cap gets ``invalid_grant`` and revokes nothing.
* **Reuse.** Any other revoked token — presented after the window, two generations back, or
  revoked on purpose (RFC 7009, admin, account lifecycle) — is a reuse: the family is revoked
  (``REFRESH_TOKEN_REUSE_PROTECTION``) and ``token.refresh_reuse`` is audited; the answer is
  ``invalid_grant`` (RFC 6749 §5.2).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, connection, router, transaction
from django.utils import timezone
from oauth2_provider.exceptions import FatalClientError
from oauth2_provider.models import (
    get_access_token_model,
    get_refresh_token_model,
    refresh_token_expire_timedelta,
)
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.token_exchange.actor import revoke_exchanged
from mcp_oauth.authorization_server.tokens import rotation_statement
from mcp_oauth.authorization_server.tokens.rotation_sql import (
    _claim_rotation,
    _collect_access_tokens,
    _delete_member_access_tokens,
    _deleted_access_tokens,
    _presented_row,
    _revoke_members,
    _set_null_relations,
)
from mcp_oauth.authorization_server.tokens.session_limits import check_session_limits
from mcp_oauth.models import AuditEvent, RefreshGeneration, RefreshTokenGeneration
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.db import cursor as db_cursor
from mcp_oauth.shared.db import insert, returning_supported

#: Largest accepted ``REFRESH_TOKEN_GRACE_SECONDS`` (a longer window keeps a stolen token useful longer).
MAX_GRACE_SECONDS = 300
#: Largest accepted ``REFRESH_TOKEN_GRACE_SIBLINGS``.
MAX_GRACE_SIBLINGS = 1000


def grace_siblings() -> int:
    """``REFRESH_TOKEN_GRACE_SIBLINGS`` clamped to ``0..MAX_GRACE_SIBLINGS``: sibling pairs per generation."""
    try:
        value = int(mcp_oauth_settings.REFRESH_TOKEN_GRACE_SIBLINGS or 0)
    except (TypeError, ValueError):
        return 0
    return max(0, min(value, MAX_GRACE_SIBLINGS))


def grace_seconds() -> int:
    """``REFRESH_TOKEN_GRACE_SECONDS`` clamped to ``0..MAX_GRACE_SECONDS`` (seconds)."""
    try:
        value = int(mcp_oauth_settings.REFRESH_TOKEN_GRACE_SECONDS or 0)
    except (TypeError, ValueError):
        return 0
    return max(0, min(value, MAX_GRACE_SECONDS))


def loaded_generation(refresh_token) -> tuple[bool, RefreshGeneration | None]:
    """``(True, generation or None)`` when ``refresh_token``'s generation was read with the row
    (:func:`_presented_row`), else ``(False, None)``. A generation's ``scope`` and family never
    change; its ``rotated_at`` is read again under the row lock before anything is decided on it."""
    if not type(refresh_token).mcp_generation.is_cached(refresh_token):
        return False, None
    link = getattr(refresh_token, "mcp_generation", None)  # None: cached as absent (no query)
    return True, (link.generation if link is not None else None)


def generation_id_of(refresh_token, *, reread: bool = False) -> uuid.UUID | None:
    """The id of ``refresh_token``'s generation, or None for a token issued before generations existed.

    From the row's loaded generation unless ``reread`` (or it was not loaded): then one query.
    """
    if not reread:
        loaded, generation = loaded_generation(refresh_token)
        if loaded:
            return generation.pk if generation is not None else None
    return (
        RefreshTokenGeneration.objects.filter(refresh_token_id=refresh_token.pk)
        .values_list("generation_id", flat=True)
        .first()
    )


def grace_successor(generation: RefreshGeneration | None, revoked_at, now) -> RefreshGeneration | None:
    """The generation a token revoked at ``revoked_at`` from ``generation`` may get a sibling in, or None.

    Conditions: ``generation`` was rotated (not revoked on purpose: the token was revoked by
    that rotation, ``revoked_at >= rotated_at``) less than :func:`grace_seconds` ago, and its
    successor is the newest generation of the family and still has a live member. A member whose
    access token is gone is not live: a revocation that raced the rotation (the user's grants,
    the family) deleted the access token of the pair it did not see yet, and such a refresh token
    is refused (:meth:`RefreshRotationMixin.validate_refresh_token`), as DOT refuses it.
    """
    window = grace_seconds()
    if generation is None or generation.rotated_at is None or revoked_at is None or not window:
        return None
    if revoked_at < generation.rotated_at or now - generation.rotated_at > timedelta(seconds=window):
        return None
    successor = RefreshGeneration.objects.filter(parent=generation).first()
    if successor is None or successor.rotated_at is not None:
        return None
    return successor if has_live_member(successor) else None


def has_live_member(generation: RefreshGeneration) -> bool:
    """Whether ``generation`` has a live member: a refresh token not revoked that still has its access token."""
    return (
        get_refresh_token_model()
        .objects.filter(mcp_generation__generation=generation, revoked__isnull=True, access_token__isnull=False)
        .exists()
    )


def take_write_lock() -> None:
    """On SQLite, make the current transaction a writer before it reads anything.

    SQLite has no row locks (``SELECT … FOR UPDATE`` is a no-op): two refresh transactions that
    both read first and then write deadlock, and one fails at once with "database is locked"
    instead of waiting. A first statement that writes (nothing) takes the database's write lock,
    waiting for it under the connection's busy timeout, so concurrent rotations queue up.
    PostgreSQL and the other backends rely on the row lock the claim (:func:`_claim_rotation`) or
    :meth:`RefreshRotationMixin._locked_generation` takes.
    """
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {RefreshGeneration._meta.db_table} SET rotated_at = rotated_at WHERE 1 = 0")


def revoke_family(token_family) -> None:
    """DOT's ``RefreshToken.revoke_family()`` once the family's generations are locked.

    They are locked oldest first (the order a grace request takes them in): a rotation or a
    grace request in flight in the family holds one of them until it commits, so the family is
    revoked after it, the pair it issued included. Without the locks that pair, inserted after
    the revocation read the family, would stay live. The tokens exchanged from the family's live
    access tokens (RFC 8693) are revoked with it (:func:`~mcp_oauth.authorization_server.token_exchange.actor.revoke_exchanged`).
    """
    RefreshToken = get_refresh_token_model()
    with transaction.atomic(using=router.db_for_write(RefreshToken)):
        take_write_lock()
        list(
            RefreshGeneration.objects.select_for_update()
            .filter(token_family=token_family)
            .order_by("created_at", "pk")
            .values_list("pk", flat=True)
        )
        subjects = [
            checksum
            for checksum in RefreshToken.objects.filter(token_family=token_family).values_list(
                "access_token__token_checksum", flat=True
            )
            if checksum
        ]
        RefreshToken.revoke_family(token_family)
        revoke_exchanged(subjects)


if TYPE_CHECKING:
    from oauth2_provider.oauth2_validators import OAuth2Validator as _MixinBase
else:
    _MixinBase = object


class RefreshRotationMixin(_MixinBase):
    """Validator mixin implementing the rotation described in the module docstring.

    It goes before DOT's ``OAuth2Validator`` in the validator's bases and calls its methods
    (``_check_and_set_request_resource``, ``_create_access_token`` …) and their ``super()``
    versions; for the type checker it is declared against ``OAuth2Validator``.
    """

    # --- validation (outside the saving transaction) ------------------------------------

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs) -> bool:
        rt = _presented_row(refresh_token)
        if rt is None:
            return False
        if rt.revoked is None:
            # DOT's checks for a live token, on this row: DOT would read the row again, and a
            # concurrent rotation committed in between would look like a reuse to it (and revoke
            # the family the winner just extended). The race is settled under the lock at saving.
            if rt.access_token is None:
                return False
            expire_delta = refresh_token_expire_timedelta()
            if expire_delta and rt.access_token.expires + expire_delta <= timezone.now():
                return False
            if rt.application_id != getattr(client, "pk", None):
                return False
            check_session_limits(rt, self._generation_of(rt), request)  # idle window, session cap
            request.user = rt.user
            request.refresh_token = refresh_token
            request.refresh_token_instance = rt
            return True
        generation = self._generation_of(rt)
        if grace_successor(generation, rt.revoked, timezone.now()) is not None:
            if rt.application_id != getattr(client, "pk", None):
                return False
            check_session_limits(rt, generation, request)
            request.user = rt.user
            request.refresh_token = refresh_token
            request.refresh_token_instance = rt
            return True
        self._refresh_reuse(rt, client, request)
        return False

    @staticmethod
    def _generation_of(rt) -> RefreshGeneration | None:
        """``rt``'s generation: loaded with the row, else one query; None for a token older than generations."""
        loaded, generation = loaded_generation(rt)
        if not loaded:
            generation_id = generation_id_of(rt)
            generation = RefreshGeneration.objects.filter(pk=generation_id).first() if generation_id else None
        return generation

    def _refresh_reuse(self, rt, client, request) -> None:
        """A revoked refresh token came back outside the grace: revoke its family (:func:`revoke_family`), audit it."""
        family_revoked = bool(oauth2_settings.REFRESH_TOKEN_REUSE_PROTECTION and rt.token_family)
        if family_revoked:
            revoke_family(rt.token_family)
        record(
            AuditEvent.Kind.REFRESH_TOKEN_REUSE,
            request=request,
            user=rt.user,
            client_id=getattr(rt.application, "client_id", ""),
            detail={
                "presented_by": getattr(client, "client_id", None),
                "revoked_at": rt.revoked.isoformat(),
                "family_revoked": family_revoked,
                "grace_seconds": grace_seconds(),
            },
        )

    def get_original_scopes(self, refresh_token, request, *args, **kwargs):
        rt = request.refresh_token_instance
        loaded, generation = loaded_generation(rt)
        if loaded and generation is not None:
            return generation.scope  # a generation's scope never changes
        generation_id = None if loaded else generation_id_of(rt)
        if generation_id is not None:
            return RefreshGeneration.objects.filter(pk=generation_id).values_list("scope", flat=True).first() or ""
        return super().get_original_scopes(refresh_token, request, *args, **kwargs)

    # --- saving (inside DOT's transaction) ----------------------------------------------

    def _save_bearer_token(self, token, request, *args, **kwargs):
        RefreshToken = get_refresh_token_model()
        presented = getattr(request, "refresh_token_instance", None)
        if (
            request.grant_type != "refresh_token"
            or not token.get("refresh_token")
            or not isinstance(presented, RefreshToken)
        ):
            return super()._save_bearer_token(token, request, *args, **kwargs)
        if "scope" not in token:
            raise FatalClientError("Failed to renew access token: missing scope")
        take_write_lock()
        self._check_and_set_request_resource(request)
        expires = timezone.now() + timedelta(
            seconds=token.get("expires_in", oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS)
        )

        loaded, generation = loaded_generation(presented)
        using = router.db_for_write(RefreshGeneration)
        if loaded and generation is not None and returning_supported(using):
            now = timezone.now()
            with db_cursor(using):  # one cursor for every statement of the rotation
                if _claim_rotation(generation.pk, now, using):
                    # The single winner: the generation row is ours (locked by the UPDATE) until commit.
                    generation.rotated_at = now
                    set_null = _set_null_relations(using)
                    if rotation_statement.applies(self, set_null, using):
                        assert set_null is not None
                        self._rotate_in_one_statement(
                            presented, generation, token, request, expires, now, set_null, using
                        )
                    else:
                        self._rotate(presented, generation, token, request, expires, now, using)
                    return
            # Rotated already: the grace / reuse path below reads the generation under its lock.

        generation = self._locked_generation(presented, token["scope"])
        now = timezone.now()
        revoked_at = RefreshToken.objects.filter(pk=presented.pk).values_list("revoked", flat=True).first()
        if generation.rotated_at is None:
            if revoked_at is not None:  # revoked on purpose since it was validated
                raise errors.InvalidGrantError(description="The refresh token was revoked.", request=request)
            target = RefreshGeneration.objects.create(
                token_family=presented.token_family,
                parent=generation,
                scope=token["scope"],
                session_started_at=generation.session_started_at,  # the session goes on
            )
            generation.rotated_at = now
            generation.save(update_fields=["rotated_at"])
            # The members' access tokens, read whole: deleting them needs no second read.
            AccessToken = get_access_token_model()
            access_tokens = list(
                AccessToken.objects.filter(
                    refresh_token__mcp_generation__generation=generation, refresh_token__revoked__isnull=True
                )
            )
            RefreshToken.objects.filter(mcp_generation__generation=generation, revoked__isnull=True).update(
                revoked=now, updated=now
            )
            _collect_access_tokens(access_tokens)
            source, sibling = presented, False
        else:
            successor = grace_successor(generation, revoked_at, now)
            if successor is None:
                raise errors.InvalidGrantError(description="The refresh token was already used.", request=request)
            target = RefreshGeneration.objects.select_for_update().get(pk=successor.pk)
            # Read again under the successor's row lock: a revocation of the user's grants
            # (mcp_oauth.authorization_server.tokens.grants.revoke_user_grants) holds it while it revokes the members, and
            # committed them revoked if this request waited for it.
            if target.rotated_at is not None or not has_live_member(target):
                raise errors.InvalidGrantError(description="The refresh token was already used.", request=request)
            # Counted under the successor's row lock: concurrent grace requests queue on it.
            if RefreshTokenGeneration.objects.filter(generation=target, sibling=True).count() >= grace_siblings():
                raise errors.InvalidGrantError(
                    description="The refresh token was already used (too many concurrent refreshes).",
                    request=request,
                )
            source, sibling = None, True
        request._mcp_generation = (target, sibling)
        access_token = self._create_access_token(expires, request, token, source_refresh_token=source)
        self._create_refresh_token(request, token["refresh_token"], access_token, presented)

    def _rotate(self, presented, generation, token, request, expires, now, using: str) -> None:
        """The winner's rotation, once :func:`_claim_rotation` has marked ``generation`` rotated:
        revoke the generation's live members, delete their access tokens, issue the new pair in a
        successor generation.

        :raises InvalidGrantError: ``presented`` was revoked since it was validated (the
            transaction, claim included, rolls back).
        """
        updates = _set_null_relations(using)
        if updates is None:  # deleting an access token needs the Collector here
            AccessToken = get_access_token_model()
            access_tokens = list(
                AccessToken.objects.filter(
                    refresh_token__mcp_generation__generation=generation, refresh_token__revoked__isnull=True
                )
            )
            deleted = None
        else:
            deleted = _delete_member_access_tokens(generation.pk, updates, using)
        if presented.pk not in _revoke_members(generation.pk, now, using):
            # Revoked on purpose since it was validated; nothing is announced, everything rolls back.
            raise errors.InvalidGrantError(description="The refresh token was revoked.", request=request)
        if deleted is None:
            _collect_access_tokens(access_tokens)
        else:
            _deleted_access_tokens(deleted, using, origin=presented)
        target = insert(
            RefreshGeneration(
                token_family=presented.token_family,
                parent=generation,
                scope=token["scope"],
                session_started_at=generation.session_started_at,
            ),
            using=using,
        )
        request._mcp_generation = (target, False)
        access_token = self._create_access_token(expires, request, token, source_refresh_token=presented)
        self._create_refresh_token(request, token["refresh_token"], access_token, presented)

    def _rotate_in_one_statement(
        self, presented, generation, token, request, expires, now, set_null: list[tuple[str, str, type]], using: str
    ) -> None:
        """:meth:`_rotate` as one statement (:mod:`.rotation_statement`), once :func:`_claim_rotation`
        has marked ``generation`` rotated.

        :raises InvalidGrantError: ``presented`` was revoked since it was validated (the
            transaction, claim included, rolls back).
        """
        target = RefreshGeneration(
            token_family=presented.token_family,
            parent=generation,
            scope=token["scope"],
            session_started_at=generation.session_started_at,
        )
        request._mcp_generation = (target, False)
        access_token = self._new_access_token(expires, request, token, source_refresh_token=presented)
        refresh_token, member = self._new_refresh_token(request, token["refresh_token"], access_token, presented)
        rotated = rotation_statement.rotate(
            generation,
            presented,
            now,
            target,
            access_token,
            refresh_token,
            member,
            set_null,
            using,
            along=self._rows_written_with_rotation(token, request),
        )
        if not rotated.presented_revoked:
            # Revoked on purpose since it was validated; nothing is announced, everything rolls back.
            raise errors.InvalidGrantError(description="The refresh token was revoked.", request=request)
        _deleted_access_tokens(rotated.deleted, using, origin=presented)
        request._mcp_access_token = access_token
        request._mcp_token_family = refresh_token.token_family

    def _rows_written_with_rotation(self, token, request) -> list[Any]:
        """Other new rows of the grant that the rotation's single statement writes along (unsaved
        instances: the grant's audit event); none here."""
        return []

    def _new_access_token(self, expires, request, token, source_refresh_token=None):
        """DOT's access token for ``token`` (the fields DOT's ``_create_access_token`` sets), unsaved."""
        id_token = token.get("id_token", None)
        if id_token:
            id_token = self._load_id_token(id_token)
        access_token = get_access_token_model()(
            user=request.user,
            scope=token["scope"],
            expires=expires,
            id_token=id_token,
            application=request.client,
            source_refresh_token=source_refresh_token,
            resource=getattr(request, "resource", []),  # RFC 8707
        )
        self._set_token_value(access_token, token["access_token"])
        return access_token

    def _new_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        """DOT's refresh token (the fields DOT's ``_create_refresh_token`` sets) and its generation
        membership (``request._mcp_generation``, else a new generation for a new family), unsaved.

        :returns: ``(refresh token, RefreshTokenGeneration)``; the new generation, when there is
            one, is ``membership.generation`` and unsaved too.
        """
        RefreshToken = get_refresh_token_model()
        refresh_token = RefreshToken(
            user=request.user,
            application=request.client,
            access_token=access_token,
            token_family=previous_refresh_token.token_family if previous_refresh_token else uuid.uuid4(),
            resource=getattr(request, "resource", []),  # RFC 8707
        )
        self._set_token_value(refresh_token, refresh_token_code)
        target = getattr(request, "_mcp_generation", None)
        if target is None:
            generation, sibling = (
                RefreshGeneration(token_family=refresh_token.token_family, scope=access_token.scope),
                False,
            )
        else:
            generation, sibling = target
        return refresh_token, RefreshTokenGeneration(
            refresh_token=refresh_token, generation=generation, sibling=sibling
        )

    def _locked_generation(self, refresh_token, scope: str) -> RefreshGeneration:
        """``refresh_token``'s generation, locked for this transaction (created for older tokens)."""
        generation_id = generation_id_of(refresh_token)
        if generation_id is None:
            try:
                with transaction.atomic():
                    generation = RefreshGeneration.objects.create(token_family=refresh_token.token_family, scope=scope)
                    RefreshTokenGeneration.objects.create(refresh_token_id=refresh_token.pk, generation=generation)
                generation_id = generation.pk
            except IntegrityError:  # a concurrent request linked it first
                generation_id = generation_id_of(refresh_token, reread=True)
                if generation_id is None:  # the link that refused ours is gone again
                    raise RefreshGeneration.DoesNotExist("The refresh token's generation vanished.") from None
        return RefreshGeneration.objects.select_for_update().get(pk=generation_id)

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        """DOT's refresh token (:meth:`_new_refresh_token`) and its generation membership (a new
        generation for a new family), each inserted with :func:`mcp_oauth.shared.db.insert`."""
        refresh_token, member = self._new_refresh_token(
            request, refresh_token_code, access_token, previous_refresh_token
        )
        insert(refresh_token)
        if member.generation._state.adding:
            insert(member.generation)
        insert(member)
        return refresh_token


def prune_generations(older_than_seconds: int = 24 * 3600) -> int:
    """Delete generations left without refresh tokens (DOT's ``cleartokens`` deleted them) and older than
    ``older_than_seconds``; schedule it with DOT's cleanup. :returns: the number of generations deleted."""
    cutoff = timezone.now() - timedelta(seconds=older_than_seconds)
    deleted, _ = RefreshGeneration.objects.filter(members__isnull=True, created_at__lt=cutoff).delete()
    return deleted
