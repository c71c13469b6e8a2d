"""The winner's refresh-token rotation in one statement (PostgreSQL).

Once :func:`~.rotation._claim_rotation` has marked a generation rotated (the compare-and-set
that picks the single winner, holding the generation's row lock), the rotation revokes the
generation's live members, deletes their access tokens and inserts the new pair in a successor
generation (:meth:`~.rotation.RefreshRotationMixin._rotate`: seven statements). On PostgreSQL
it is one data-modifying ``WITH`` instead, built once per database alias from the models'
``_meta``::

    WITH members AS MATERIALIZED (             -- the live members, locked as DOT's revoke() locks them
             SELECT id, access_token_id FROM refresh_token
             WHERE id = ANY(ARRAY(SELECT refresh_token_id FROM member WHERE generation_id = %s))
               AND revoked IS NULL FOR NO KEY UPDATE),
         deleted AS (DELETE FROM access_token WHERE id IN (SELECT access_token_id FROM members)
                     RETURNING <every column>),
         cleared_0 AS (UPDATE <table> SET <fk> = NULL WHERE <fk> IN (SELECT id FROM deleted)),
         revoked AS (UPDATE refresh_token SET revoked = %s, updated = %s, access_token_id = NULL
                     WHERE id IN (SELECT id FROM members) AND revoked IS NULL RETURNING id),
         new_generation AS (INSERT INTO generation … VALUES (…)),
         new_access_token AS (INSERT INTO access_token … VALUES (…) RETURNING id),
         new_refresh_token AS (INSERT INTO refresh_token … VALUES (…, (SELECT id FROM new_access_token), …)
                               RETURNING id),
         new_member AS (INSERT INTO member … VALUES ((SELECT id FROM new_refresh_token), %s, false)),
         along_0 AS (INSERT INTO audit_event … VALUES (…) RETURNING id)
    SELECT (SELECT id FROM new_access_token), (SELECT id FROM new_refresh_token),
           (SELECT id FROM along_0), EXISTS (SELECT 1 FROM revoked WHERE id = <presented>), deleted.*
    FROM (SELECT 1) AS one LEFT JOIN deleted ON TRUE

(``cleared_N``: one per ``SET_NULL`` foreign key to the access token, as ``QuerySet.delete()``
clears them; ``along_N``: the grant's other new rows, its audit event.) The new rows are written whether or not the presented token was among the
revoked members; when it was not (revoked on purpose since it was validated), the caller
raises ``invalid_grant`` and the transaction, claim included, rolls back.

**Why the claim stays a statement of its own.** Every part of one statement reads the same
snapshot, taken when the statement starts. A claim that waited for a grace request holding the
generation's row lock would then not see the sibling that request committed, and the sibling
would survive the rotation. The claim first, then this statement with a fresh snapshot, sees it.

The rows are the validator's (:meth:`~.rotation.RefreshRotationMixin._new_access_token`,
:meth:`~.rotation.RefreshRotationMixin._new_refresh_token`) and are written as
:func:`mcp_oauth.shared.db.insert` writes them (the same values, ``pre_save`` / ``post_save`` sent
when they have receivers; ``pre_save`` of the new refresh token and member comes before the
statement, so it sees their key to the row inserted with them unset); the deleted access tokens
are announced as the seven-statement path announces them. :func:`applies` says when this statement is used: PostgreSQL, every model
writable by :mod:`mcp_oauth.shared.db`, no ``pre_delete`` receiver or other ``on_delete`` rule on the
access token (:func:`~.rotation._set_null_relations`), and a validator whose
``_create_access_token`` / ``_create_refresh_token`` are this project's (a site that overrides
them gets them called, on the seven-statement path).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.models import RefreshGeneration, RefreshTokenGeneration
from mcp_oauth.shared.db import (
    InsertPlan,
    columns,
    from_row,
    insert,
    insert_plan_exists,
    insert_sql,
    insert_values,
    inserted,
    table,
)
from mcp_oauth.shared.db import cursor as db_cursor

__all__ = ["Rotated", "applies", "rotate"]


@dataclass
class Rotated:
    """What :func:`rotate` did: the new rows, the access tokens it deleted (instances read back
    from ``RETURNING``, not yet announced) and whether ``presented`` was among the members it
    revoked. When it was not, the caller rolls back, and the new rows were not announced
    (``post_save``) nor given their keys."""

    access_token: Any
    refresh_token: Any
    member: RefreshTokenGeneration
    deleted: list[Any]
    presented_revoked: bool


def _own(validator: Any) -> bool:
    """Whether the validator's row-writing methods are this project's."""
    cls = type(validator)
    known = _OWN.get(cls)
    if known is None:
        known = all(
            getattr(cls, name).__module__.startswith("mcp_oauth.")
            for name in ("_create_access_token", "_create_refresh_token")
        )
        _OWN[cls] = known
    return known


_OWN: dict[type, bool] = {}


def applies(validator: Any, set_null: list[tuple[str, str, type]] | None, using: str) -> bool:
    """Whether :func:`rotate` serves this rotation (see the module docstring).

    ``set_null``: :func:`~.rotation._set_null_relations` for ``using`` (None: the collector is needed).
    """
    if set_null is None or connections[using].vendor != "postgresql" or not _own(validator):
        return False
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    written = (AccessToken, RefreshToken, RefreshGeneration, RefreshTokenGeneration)
    if any(model in written for _, _, model in set_null):  # a row would be changed twice by one statement
        return False
    return (
        insert_plan_exists(AccessToken, using, auto_pk=True)
        and insert_plan_exists(RefreshToken, using, auto_pk=True)
        and insert_plan_exists(RefreshGeneration, using, auto_pk=False)
        and insert_plan_exists(RefreshTokenGeneration, using, auto_pk=False)
        and AccessToken._meta.pk.name == "id"
        and RefreshToken._meta.pk.name == "id"
    )


def _sql(
    using: str, plans: tuple[InsertPlan, ...], along: tuple[InsertPlan, ...], set_null: list[tuple[str, str, type]]
) -> str:
    """The statement of the module docstring for these insert plans, built once."""
    # Keyed by the plans' SQL (hashing the plans would hash each of their fields on every grant).
    key = (using, tuple(plan.sql for plan in plans), tuple(plan.sql for plan in along), tuple(set_null))
    sql = _SQL.get(key)
    if sql is not None:
        return sql
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    qn = connections[using].ops.quote_name

    def col(model: Any, name: str) -> str:
        return qn(model._meta.get_field(name).column)

    rt_id, at_id = col(RefreshToken, "id"), col(AccessToken, "id")
    generation_plan, access_plan, refresh_plan, member_plan = plans
    parts = [
        "members AS MATERIALIZED ("
        f"SELECT {rt_id}, {col(RefreshToken, 'access_token')} FROM {table(RefreshToken, using)} "
        # ANY(ARRAY(…)): the members found by primary key whatever the planner's statistics say
        f"WHERE {rt_id} = ANY(ARRAY(SELECT {col(RefreshTokenGeneration, 'refresh_token')} "
        f"FROM {table(RefreshTokenGeneration, using)} WHERE {col(RefreshTokenGeneration, 'generation')} = %s)) "
        f"AND {col(RefreshToken, 'revoked')} IS NULL FOR NO KEY UPDATE)",
        f"deleted AS (DELETE FROM {table(AccessToken, using)} WHERE {at_id} IN "
        f"(SELECT {col(RefreshToken, 'access_token')} FROM members) RETURNING {columns(AccessToken, using)})",
    ]
    for index, (related_table, fk_column, _) in enumerate(set_null):
        parts.append(
            f"cleared_{index} AS (UPDATE {related_table} SET {fk_column} = NULL "
            f"WHERE {fk_column} IN (SELECT {at_id} FROM deleted))"
        )
    parts += [
        f"revoked AS (UPDATE {table(RefreshToken, using)} SET {col(RefreshToken, 'revoked')} = %s, "
        f"{col(RefreshToken, 'updated')} = %s, {col(RefreshToken, 'access_token')} = NULL "
        f"WHERE {rt_id} IN (SELECT {rt_id} FROM members) AND {col(RefreshToken, 'revoked')} IS NULL "
        f"RETURNING {rt_id})",
        f"new_generation AS ({insert_sql(generation_plan)})",
        f"new_access_token AS ({insert_sql(access_plan)})",
        f"new_refresh_token AS ({insert_sql(refresh_plan, {'access_token': f'(SELECT {at_id} FROM new_access_token)'})})",
        f"new_member AS ({insert_sql(member_plan, {'refresh_token': f'(SELECT {rt_id} FROM new_refresh_token)'})})",
    ]
    returned = [f"(SELECT {at_id} FROM new_access_token)", f"(SELECT {rt_id} FROM new_refresh_token)"]
    for index, plan in enumerate(along):
        parts.append(f"along_{index} AS ({insert_sql(plan)})")
        returned.append(
            f"(SELECT {qn(str(plan.returning[0].column))} FROM along_{index})" if plan.returning else "NULL"
        )
    sql = (
        "WITH " + ", ".join(parts) + f" SELECT {', '.join(returned)}, "
        f"EXISTS (SELECT 1 FROM revoked WHERE {rt_id} = %s), "
        f"{columns(AccessToken, using, 'deleted')} FROM (SELECT 1) AS one LEFT JOIN deleted ON TRUE"
    )
    _SQL[key] = sql
    return sql


_SQL: dict[tuple, str] = {}


def rotate(
    generation: RefreshGeneration,
    presented: Any,
    now: Any,
    new_generation: RefreshGeneration,
    access_token: Any,
    refresh_token: Any,
    member: RefreshTokenGeneration,
    set_null: list[tuple[str, str, type]],
    using: str,
    along: Sequence[Any] = (),
) -> Rotated:
    """Run the statement for the claimed ``generation``: revoke its live members at ``now``, delete
    their access tokens, write the four new rows (unsaved instances: ``refresh_token.access_token``
    is ``access_token``, ``member.refresh_token`` is ``refresh_token``) and the rows ``along``
    (unsaved instances of other models, with no key to these: the grant's audit event). Call it
    inside the grant's transaction, once :func:`applies` said yes.

    :raises TypeError: a new row has an expression value (:func:`mcp_oauth.shared.db.insert_values`).
    """
    prepared = [
        insert_values(new_generation, using),
        insert_values(access_token, using),
        insert_values(refresh_token, using, linked=frozenset({"access_token"})),
        insert_values(member, using, linked=frozenset({"refresh_token"})),
    ]
    if any(part is None for part in prepared):  # applies() checked the plans
        raise RuntimeError("a token model lost its insert plan")
    alongside, apart = [], []
    for row in along:
        part = insert_values(row, using)
        if part is None:
            apart.append(row)  # the ORM's path, after the statement
        else:
            alongside.append((row, part))
    plans = tuple(part[0] for part in prepared if part is not None)
    along_plans = tuple(part[0] for _, part in alongside)
    connection = connections[using]
    RefreshToken = get_refresh_token_model()
    params: list[Any] = [
        RefreshGeneration._meta.pk.get_db_prep_save(generation.pk, connection),
        RefreshToken._meta.get_field("revoked").get_db_prep_save(now, connection),
        RefreshToken._meta.get_field("updated").get_db_prep_save(now, connection),
    ]
    for part in prepared:
        assert part is not None
        params += part[1]
    for _, part in alongside:
        params += part[1]
    params.append(presented.pk)
    AccessToken = get_access_token_model()
    with db_cursor(using) as cursor:
        cursor.execute(_sql(using, plans, along_plans, set_null), params)
        rows = cursor.fetchall()
    first, skip = rows[0], 2 + len(alongside)
    presented_revoked = bool(first[skip])
    deleted = [token for token in (from_row(AccessToken, row, skip + 1, using, connection) for row in rows) if token]
    if presented_revoked:  # else the caller rolls back: nothing is announced
        inserted(new_generation, using, plans[0])
        inserted(access_token, using, plans[1], first[0])
        refresh_token.access_token = access_token  # sets access_token_id from the saved row
        inserted(refresh_token, using, plans[2], first[1])
        member.refresh_token = refresh_token  # and the member's key
        inserted(member, using, plans[3])
        for index, (row, part) in enumerate(alongside):
            inserted(row, using, part[0], first[2 + index])
        for row in apart:
            insert(row, using=using)
    return Rotated(access_token, refresh_token, member, deleted, presented_revoked)
