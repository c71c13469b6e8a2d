"""The rotation's hand-written SQL (:mod:`.rotation`): reading the presented refresh token with its
generation in one query, claiming a generation (compare-and-set), revoking its members and
deleting their access tokens (``DELETE … RETURNING`` where supported, ``post_delete`` sent, the
token cache told), each statement built once per database from the models' ``_meta``
(:mod:`mcp_oauth.shared.db`).

On PostgreSQL the whole rotation after the claim is one statement instead: :mod:`.rotation_statement`.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections, router
from django.db.models import F
from django.db.models.deletion import DO_NOTHING, SET_NULL, Collector, get_candidate_relations_to_delete
from django.db.models.signals import post_delete, pre_delete
from oauth2_provider.models import (
    get_access_token_model,
    get_refresh_token_model,
)

from mcp_oauth.models import RedeemedAuthorizationCode, RefreshGeneration, RefreshTokenGeneration
from mcp_oauth.resource_server.cache import forget_token, token_checksum
from mcp_oauth.shared.db import columns, from_row, prep, returning_supported, table
from mcp_oauth.shared.db import cursor as db_cursor


def _presented_row(refresh_token: str):
    """The stored row a raw refresh token names: the live one, else the most recently revoked;
    with its user, access token and generation (one query; the client is compared by id, and
    read only on the rare reuse path)."""
    checksum = token_checksum(refresh_token)
    RefreshToken = get_refresh_token_model()
    using = router.db_for_read(RefreshToken)
    if not returning_supported(using):
        return (
            RefreshToken.objects.filter(token_checksum=checksum)
            .select_related("user", "access_token", "mcp_generation__generation")
            .order_by(F("revoked").desc(nulls_first=True))
            .first()
        )
    with db_cursor(using) as cursor:
        cursor.execute(_presented_sql(using), [checksum])
        row = cursor.fetchone()
    if row is None:
        return None
    return _presented_instances(row, using)


#: The hand-written SELECT of :func:`_presented_row`, per database alias.
_PRESENTED_SQL: dict[str, str] = {}


def _presented_models() -> tuple:
    return (
        get_refresh_token_model(),
        get_user_model(),
        get_access_token_model(),
        RefreshTokenGeneration,
        RefreshGeneration,
    )


def _presented_sql(using: str) -> str:
    """What the ORM's ``select_related("user", "access_token", "mcp_generation__generation")``
    of :func:`_presented_row` selects, compiled once."""
    sql = _PRESENTED_SQL.get(using)
    if sql is None:
        RefreshToken, User, AccessToken, Link, Generation = _presented_models()
        qn = connections[using].ops.quote_name

        def col(model, name):
            return qn(model._meta.get_field(name).column)

        user_fk = RefreshToken._meta.get_field("user")
        rt, u, at, link, gen = (qn(alias) for alias in ("rt", "u", "tok", "link", "gen"))
        sql = (
            f"SELECT {columns(RefreshToken, using, 'rt')}, {columns(User, using, 'u')}, "
            f"{columns(AccessToken, using, 'tok')}, {columns(Link, using, 'link')}, "
            f"{columns(Generation, using, 'gen')} "
            f"FROM {table(RefreshToken, using)} {rt} "
            f"INNER JOIN {table(User, using)} {u} ON {u}.{qn(user_fk.target_field.column)} = {rt}.{qn(user_fk.column)} "
            f"LEFT OUTER JOIN {table(AccessToken, using)} {at} "
            f"ON {at}.{col(AccessToken, 'id')} = {rt}.{col(RefreshToken, 'access_token')} "
            f"LEFT OUTER JOIN {table(Link, using)} {link} "
            f"ON {link}.{col(Link, 'refresh_token')} = {rt}.{col(RefreshToken, 'id')} "
            f"LEFT OUTER JOIN {table(Generation, using)} {gen} "
            f"ON {gen}.{col(Generation, 'id')} = {link}.{col(Link, 'generation')} "
            f"WHERE {rt}.{col(RefreshToken, 'token_checksum')} = %s "
            f"ORDER BY CASE WHEN {rt}.{col(RefreshToken, 'revoked')} IS NULL THEN 0 ELSE 1 END, "
            f"{rt}.{col(RefreshToken, 'revoked')} DESC LIMIT 1"
        )
        _PRESENTED_SQL[using] = sql
    return sql


def _presented_instances(row, using: str):
    """The refresh token of a :func:`_presented_sql` row, its user, access token and generation
    cached on it as ``select_related`` caches them."""
    RefreshToken, User, AccessToken, Link, Generation = _presented_models()
    connection = connections[using]
    offset = 0
    instances = []
    for model in (RefreshToken, User, AccessToken, Link, Generation):
        instances.append(from_row(model, row, offset, using, connection))
        offset += len(model._meta.concrete_fields)
    rt, user, access_token, link, generation = instances
    RefreshToken._meta.get_field("user").set_cached_value(rt, user)
    access_token_field = RefreshToken._meta.get_field("access_token")
    access_token_field.set_cached_value(rt, access_token)
    if access_token is not None:
        access_token_field.remote_field.set_cached_value(access_token, rt)
    link_field = Link._meta.get_field("refresh_token")
    link_field.remote_field.set_cached_value(rt, link)
    if link is not None:
        link_field.set_cached_value(link, rt)
        Link._meta.get_field("generation").set_cached_value(link, generation)
    return rt


def _statements(using: str) -> dict[str, str]:
    """The rotation's hand-written statements for ``using``, built once from the models' ``_meta``."""
    statements = _STATEMENTS.get(using)
    if statements is None:
        RefreshToken = get_refresh_token_model()
        qn = connections[using].ops.quote_name

        def col(model, name):
            return qn(model._meta.get_field(name).column)

        AccessToken = get_access_token_model()
        generations, refresh_tokens = table(RefreshGeneration, using), table(RefreshToken, using)
        member_ids = (
            f"SELECT {col(RefreshTokenGeneration, 'refresh_token')} FROM {table(RefreshTokenGeneration, using)} "
            f"WHERE {col(RefreshTokenGeneration, 'generation')} = %s"
        )
        # "id IN (SELECT …)": "id = ANY(ARRAY(SELECT …))" on PostgreSQL, where the members are then
        # found by primary key whatever the planner's statistics (without them it scans the table).
        members = f"= ANY(ARRAY({member_ids}))" if connections[using].vendor == "postgresql" else f"IN ({member_ids})"
        # The members' rows are locked (as the UPDATE that revokes them would) before their access
        # tokens are deleted: the order of DOT's RefreshToken.revoke() (refresh token, then access
        # token), so a concurrent revocation is waited for instead of deadlocking with the rotation.
        # PostgreSQL; SQLite, the other database served here, has one writer at a time.
        lock = " FOR NO KEY UPDATE" if connections[using].features.has_select_for_no_key_update else ""
        statements = {
            "claim": (
                f"UPDATE {generations} SET {col(RefreshGeneration, 'rotated_at')} = %s "
                f"WHERE {col(RefreshGeneration, 'id')} = %s AND {col(RefreshGeneration, 'rotated_at')} IS NULL"
            ),
            "revoke": (
                f"UPDATE {refresh_tokens} SET {col(RefreshToken, 'revoked')} = %s, "
                f"{col(RefreshToken, 'updated')} = %s, {col(RefreshToken, 'access_token')} = NULL "
                f"WHERE {col(RefreshToken, 'id')} {members} AND {col(RefreshToken, 'revoked')} IS NULL "
                f"RETURNING {col(RefreshToken, 'id')}"
            ),
            "delete_access_tokens": (
                f"DELETE FROM {table(AccessToken, using)} WHERE {col(AccessToken, 'id')} IN "
                f"(SELECT {col(RefreshToken, 'access_token')} FROM {refresh_tokens} "
                f"WHERE {col(RefreshToken, 'id')} {members} AND {col(RefreshToken, 'revoked')} IS NULL{lock}) "
                f"RETURNING {columns(AccessToken, using)}"
            ),
        }
        _STATEMENTS[using] = statements
    return statements


_STATEMENTS: dict[str, dict[str, str]] = {}


def _claim_rotation(generation_id, now, using: str) -> bool:
    """Mark the generation rotated at ``now`` unless it is already (compare and set).

    The ``UPDATE`` takes the row lock: a concurrent claim waits for this transaction and then
    finds the generation rotated. :returns: True for the single winner.
    """
    connection = connections[using]
    params = [
        prep(RefreshGeneration, "rotated_at", now, connection),
        prep(RefreshGeneration, "id", generation_id, connection),
    ]
    with db_cursor(using) as cursor:
        cursor.execute(_statements(using)["claim"], params)
        return cursor.rowcount == 1


def _revoke_members(generation_id, now, using: str) -> set[int]:
    """Revoke the live refresh tokens of the generation and detach them from their access tokens
    (one ``UPDATE``). :returns: the ids of the refresh tokens revoked."""
    RefreshToken = get_refresh_token_model()
    connection = connections[using]
    params = [
        prep(RefreshToken, "revoked", now, connection),
        prep(RefreshToken, "updated", now, connection),
        prep(RefreshGeneration, "id", generation_id, connection),
    ]
    with db_cursor(using) as cursor:
        cursor.execute(_statements(using)["revoke"], params)
        return {row[0] for row in cursor.fetchall()}


def _collect_access_tokens(access_tokens: list) -> None:
    """Delete ``access_tokens`` as ``QuerySet.delete()`` does, on the rows in hand (signals, ``SET_NULL``)."""
    if access_tokens:
        AccessToken = get_access_token_model()
        origin = AccessToken.objects.filter(pk__in=[token.pk for token in access_tokens])  # not evaluated
        collector = Collector(using=router.db_for_write(AccessToken), origin=origin)
        collector.collect(access_tokens)
        collector.delete()


def _set_null_relations(using: str) -> list[tuple[str, str, type]] | None:
    """``(table, column, model)`` of each ``SET_NULL`` foreign key to the access token, other than the
    refresh token's own (which :func:`_revoke_members` clears); None when deleting an access token
    needs more than that (another ``on_delete``, generic relations, ``pre_delete`` receivers)."""
    AccessToken = get_access_token_model()
    if pre_delete.has_listeners(AccessToken):
        return None
    if using not in _SET_NULL:
        detached = get_refresh_token_model()._meta.get_field("access_token")
        qn = connections[using].ops.quote_name
        updates: list[tuple[str, str, type]] | None = []
        relation: Any
        for relation in get_candidate_relations_to_delete(AccessToken._meta):
            if relation.field is detached or relation.on_delete is DO_NOTHING:
                continue
            if relation.on_delete is not SET_NULL or updates is None:
                updates = None
                continue
            model = relation.related_model
            updates.append((qn(model._meta.db_table), qn(relation.field.column), model))
        if AccessToken._meta.private_fields:
            updates = None
        _SET_NULL[using] = updates
    return _SET_NULL[using]


_SET_NULL: dict[str, list[tuple[str, str, type]] | None] = {}


def _delete_member_access_tokens(generation_id, updates: list[tuple[str, str, type]], using: str) -> list:
    """Delete the access tokens of the generation's live refresh tokens (one ``DELETE``) and clear
    the ``SET_NULL`` foreign keys :func:`_set_null_relations` lists, as ``QuerySet.delete()`` would.

    The refresh tokens still point at the deleted rows until :func:`_revoke_members` detaches them
    in the same transaction (foreign keys are checked at commit on PostgreSQL and SQLite).
    Nothing is announced: see :func:`_deleted_access_tokens`. :returns: the deleted access tokens.
    """
    AccessToken = get_access_token_model()
    connection = connections[using]
    with db_cursor(using) as cursor:
        cursor.execute(
            _statements(using)["delete_access_tokens"], [prep(RefreshGeneration, "id", generation_id, connection)]
        )
        deleted: list[Any] = [from_row(AccessToken, row, 0, using, connection) for row in cursor.fetchall()]
        # A redemption record points at the access token its code exchange issued, which has no
        # source refresh token: tokens issued by refreshes need no SET NULL there.
        issued_by_refresh = all(access_token.source_refresh_token_id is not None for access_token in deleted)
        ids = [access_token.pk for access_token in deleted]
        placeholders = ", ".join(["%s"] * len(ids))
        for related_table, fk_column, model in updates:
            if ids and not (model is RedeemedAuthorizationCode and issued_by_refresh):
                cursor.execute(
                    f"UPDATE {related_table} SET {fk_column} = NULL WHERE {fk_column} IN ({placeholders})", ids
                )
    return deleted


def _deleted_access_tokens(deleted: list, using: str, origin) -> None:
    """Announce access tokens :func:`_delete_member_access_tokens` deleted: ``post_delete`` for
    each when it has receivers, as a cascade sends it; ``origin`` is the refresh token whose
    rotation deleted them.

    The token lookup cache forgets each of them: through ``post_delete`` (the receiver of
    :mod:`mcp_oauth.resource_server.cache`), or directly when nothing listens.
    """
    if not deleted:
        return
    AccessToken = get_access_token_model()
    if post_delete.has_listeners(AccessToken):
        for access_token in deleted:
            post_delete.send(sender=AccessToken, instance=access_token, using=using, origin=origin)
    else:
        for access_token in deleted:
            forget_token(access_token.token_checksum)
    for access_token in deleted:
        setattr(access_token, AccessToken._meta.pk.attname, None)
