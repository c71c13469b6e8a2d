"""Cheap single-row writes and reads for the token endpoint's hot path.

The ORM compiles every statement anew (a ``Query``, its compiler, the field list), which costs
more CPU than the database spends on a one-row ``INSERT``. The functions here build each SQL
string once per (model, database alias) from the model's ``_meta`` and keep the ORM's storage
rules:

* :func:`insert` — ``Model.objects.create()`` of one row: the same columns, each value from
  ``field.pre_save(instance, add=True)`` (``auto_now``, ``default``, computed fields) and
  ``field.get_db_prep_save(value, connection)`` (datetimes, UUIDs, JSON stored exactly as the
  ORM stores them); the primary key read back with ``RETURNING`` where the database has it,
  else from the cursor. ``pre_save`` / ``post_save`` are sent as ``save()`` sends them, only
  when the signal has a receiver for the model (sending to nobody costs nothing then).
  Models the shortcut does not cover (parents, proxies, database defaults, generated columns,
  fields with their own SQL placeholder, expression values) go through ``save(force_insert=True)``.
* :func:`columns` / :func:`from_row` — a hand-written ``SELECT`` of a model's columns turned
  into an instance with ``Model.from_db``, each value through the converters the ORM applies.
* :func:`table` / :func:`column` / :func:`prep` — quoted names and database values for the few
  hand-written ``UPDATE`` / ``DELETE`` statements of the rotation.
* :func:`insert_values` / :func:`insert_sql` / :func:`inserted` — the same row written as one
  ``INSERT`` of a larger statement (a data-modifying ``WITH`` of the rotation), where a foreign
  key may come from another row of the statement: ``insert`` split in its three steps.
* :func:`cursor` — one cursor shared by the statements of a block (:func:`insert` included):
  opening a cursor per statement costs about as much CPU as a short statement itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connections, router
from django.db.models import Field, Model
from django.db.models.signals import post_save, pre_save

__all__ = [
    "InsertPlan",
    "column",
    "columns",
    "cursor",
    "from_row",
    "insert",
    "insert_plan_exists",
    "insert_sql",
    "insert_values",
    "inserted",
    "prep",
    "returning_supported",
    "table",
]

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class InsertPlan:
    """How one row of a model is inserted on one database: the ``INSERT`` (``RETURNING`` the
    auto primary key where the database can), its fields in column order, and the converters
    of the returned key."""

    sql: str
    fields: tuple[Field, ...]
    returning: tuple[Field, ...]
    converters: tuple[tuple[Callable[..., Any], ...], ...]


#: (model, alias, with auto pk) -> plan, or None when the model takes the ORM's path.
_insert_plans: dict[tuple[type[Model], str, bool], InsertPlan | None] = {}


@dataclass(frozen=True)
class _ReadPlan:
    attnames: tuple[str, ...]
    size: int
    pk_index: int
    converters: tuple[tuple[int, Any, tuple[Callable[..., Any], ...]], ...]  # (index, col, converters)


#: (model, alias) -> how to read a row of ``model`` selected with :func:`columns`.
_read_plans: dict[tuple[type[Model], str], _ReadPlan] = {}


#: The cursor :func:`cursor` shares in this thread or task: ``(alias, cursor)``.
_shared_cursor: ContextVar[tuple[str, Any] | None] = ContextVar("mcp_oauth_db_cursor", default=None)


@contextmanager
def cursor(using: str) -> Iterator[Any]:
    """A cursor of the database ``using`` that :func:`insert` and nested :func:`cursor` blocks
    reuse until the outermost block ends (then it is closed)."""
    shared = _shared_cursor.get()
    if shared is not None and shared[0] == using:
        yield shared[1]
        return
    with connections[using].cursor() as opened:
        token = _shared_cursor.set((using, opened))
        try:
            yield opened
        finally:
            _shared_cursor.reset(token)


def returning_supported(using: str) -> bool:
    """Whether ``UPDATE`` / ``DELETE`` / ``INSERT … RETURNING`` can be used on ``using``
    (PostgreSQL; SQLite from 3.35, where Django reports ``can_return_columns_from_insert``)."""
    connection = connections[using]
    return connection.vendor in ("postgresql", "sqlite") and connection.features.can_return_columns_from_insert


def table(model: type[Model], using: str) -> str:
    """The model's table name, quoted for ``using``."""
    return connections[using].ops.quote_name(model._meta.db_table)


def column(model: type[Model], name: str, using: str) -> str:
    """The column of field ``name`` of ``model``, quoted for ``using``."""
    field: Any = model._meta.get_field(name)
    return connections[using].ops.quote_name(field.column)


def prep(model: type[Model], name: str, value: Any, connection: Any) -> Any:
    """``value`` as the ORM sends it to ``connection`` (a database connection) for field ``name`` of ``model``."""
    field: Any = model._meta.get_field(name)
    return field.get_db_prep_save(value, connection)


def _converters(field: Field, connection: Any) -> tuple[Callable[..., Any], ...]:
    col = field.get_col(field.model._meta.db_table)
    return tuple(connection.ops.get_db_converters(col) + col.get_db_converters(connection))


def _insert_plan(model: type[Model], using: str, auto_pk: bool) -> InsertPlan | None:
    key = (model, using, auto_pk)
    try:
        return _insert_plans[key]
    except KeyError:
        pass
    connection = connections[using]
    meta: Any = model._meta
    plan: InsertPlan | None = None
    simple = not (meta.proxy or meta.parents or meta.auto_created or getattr(meta, "is_composite_pk", False))
    if simple and not (auto_pk and meta.auto_field is None):
        concrete = list(meta.local_concrete_fields)
        fields = [f for f in concrete if not (auto_pk and f is meta.auto_field)]
        unusual = any(
            f.generated or f.has_db_default() or hasattr(f, "get_placeholder") or hasattr(f, "get_placeholder_sql")
            for f in concrete
        )
        if fields and not unusual and not meta.order_with_respect_to:
            qn = connection.ops.quote_name
            returning: tuple[Field, ...] = ()
            sql = "INSERT INTO {} ({}) VALUES ({})".format(
                qn(meta.db_table), ", ".join(qn(f.column) for f in fields), ", ".join(["%s"] * len(fields))
            )
            if auto_pk:
                returning = (meta.auto_field,)
                if connection.features.can_return_columns_from_insert:
                    sql += " RETURNING " + qn(meta.auto_field.column)
            plan = InsertPlan(
                sql=sql,
                fields=tuple(fields),
                returning=returning,
                converters=tuple(_converters(f, connection) for f in returning),
            )
    _insert_plans[key] = plan
    return plan


def insert(instance: M, *, using: str | None = None) -> M:
    """Insert ``instance`` (a new, unsaved row) as ``Model.objects.create()`` would: one ``INSERT``.

    Sets the primary key, ``_state.adding = False`` and ``_state.db``. Sends ``pre_save`` and
    ``post_save`` (``created=True``) exactly as ``save()`` does, when they have receivers for
    the model. :returns: ``instance``.
    """
    cls = type(instance)
    row: Any = instance  # the private save helpers used below are not in the type stubs
    if using is None:
        using = router.db_for_write(cls, instance=instance)
    plan = _plan_for(instance, using)
    if plan is None:
        instance.save(force_insert=True, using=using)
        return instance
    params = _prepare(instance, using, plan)
    connection: Any = connections[using]
    try:  # transaction.mark_for_rollback_on_error(), as save() does, without a generator
        if params is None:  # an expression value (F(), Now(), a database default…): the ORM compiles it
            row._save_table(cls=cls, force_insert=True, using=using)
        else:
            _execute_insert(instance, plan, params, connection)
    except Exception as exc:
        if connection.in_atomic_block:
            connection.needs_rollback = True
            connection.rollback_exc = exc
        raise
    return inserted(instance, using, None)


def insert_values(
    instance: Model, using: str, *, linked: frozenset[str] = frozenset()
) -> tuple[InsertPlan, list[Any]] | None:
    """:func:`insert` up to the statement, for a row written by a larger statement.

    Sets a primary key the model generates (``default=uuid4``…), checks related objects as
    ``save()`` does, sends ``pre_save`` when it has receivers, and prepares each value as
    :func:`insert` does. The foreign keys named in ``linked`` (field names) are neither checked
    nor prepared: the statement takes them from another of its rows (:func:`insert_sql`).

    :returns: ``(plan, parameters in plan.fields order without the linked ones)``; None, with
        nothing sent, when the model takes the ORM's path (see :func:`insert`).
    :raises TypeError: a value is an expression (``F()``, ``Now()``…), set by the caller or by a
        ``pre_save`` receiver: such a row can only be written by :func:`insert` or ``save()``.
    """
    plan = _plan_for(instance, using, linked)
    if plan is None:
        return None
    params = _prepare(instance, using, plan, linked)
    if params is None:
        raise TypeError(f"a value of this {type(instance).__name__} is an expression: write the row with insert()")
    return plan, params


def _plan_for(instance: Model, using: str, linked: frozenset[str] = frozenset()) -> InsertPlan | None:
    """Set a primary key the model generates (as ``save()`` does); the row's insert plan, or None."""
    pk: Any = type(instance)._meta.pk
    if pk.name in linked:  # the key comes from another row of the statement
        return _insert_plan(type(instance), using, False)
    if getattr(instance, pk.attname) is None:
        setattr(instance, pk.attname, pk.get_pk_value_on_save(instance))
    return _insert_plan(type(instance), using, getattr(instance, pk.attname) is None)


def _prepare(instance: Model, using: str, plan: InsertPlan, linked: frozenset[str] = frozenset()) -> list[Any] | None:
    """What ``save()`` does before its ``INSERT``: the related-object check, ``pre_save`` (when it has
    receivers) and each value prepared for the database, in ``plan.fields`` order without the
    ``linked`` fields. None when a value is an expression (only the ORM can compile it)."""
    cls = type(instance)
    row: Any = instance
    row._prepare_related_fields_for_save(operation_name="save", fields=_unlinked_fields(cls, linked))
    if pre_save.has_listeners(cls):
        pre_save.send(sender=cls, instance=instance, raw=False, using=using, update_fields=None)
    connection: Any = connections[using]
    params = []
    for field in plan.fields:
        if field.name in linked:
            continue
        value = field.pre_save(instance, True)
        if hasattr(value, "resolve_expression"):
            return None
        params.append(field.get_db_prep_save(value, connection))
    return params


def _unlinked_fields(model: type[Model], linked: frozenset[str]) -> frozenset[Field] | None:
    """The concrete fields of ``model`` not named in ``linked`` (None: all), as a set: Django's
    related-object check tests membership for every field."""
    if not linked:
        return None
    key = (model, linked)
    fields = _unlinked.get(key)
    if fields is None:
        fields = _unlinked[key] = frozenset(f for f in model._meta.concrete_fields if f.name not in linked)
    return fields


_unlinked: dict[tuple[type[Model], frozenset[str]], frozenset[Field]] = {}


def insert_plan_exists(model: type[Model], using: str, auto_pk: bool) -> bool:
    """Whether rows of ``model`` (with an auto primary key to read back, or not) can be written by
    :func:`insert_values` on ``using``; False: the ORM's path (see :func:`insert`)."""
    return _insert_plan(model, using, auto_pk) is not None


def insert_sql(plan: InsertPlan, linked: dict[str, str] | None = None) -> str:
    """``plan``'s ``INSERT`` with the placeholder of each field named in ``linked`` replaced by
    its SQL expression (``(SELECT "id" FROM new_access_token)``); the other placeholders take
    :func:`insert_values`' parameters in order."""
    if not linked:
        return plan.sql
    head, _, tail = plan.sql.partition(" VALUES (")
    placeholders = [linked.get(field.name, "%s") for field in plan.fields]
    return f"{head} VALUES ({', '.join(placeholders)}){tail.partition(')')[2]}"


def inserted(instance: M, using: str, plan: InsertPlan | None, returned: Any = None) -> M:
    """Finish :func:`insert_values` once the statement ran: the auto primary key ``returned``
    (converted as :func:`insert` converts it; ``plan`` None: already set), ``_state``, and
    ``post_save`` (``created=True``) when it has receivers. Linked foreign keys are the caller's to
    set first. :returns: ``instance``."""
    cls = type(instance)
    if plan is not None and plan.returning:
        _set_returned_pk(instance, plan, returned, connections[using])
    instance._state.db = using
    instance._state.adding = False
    if post_save.has_listeners(cls):
        post_save.send(sender=cls, instance=instance, created=True, update_fields=None, raw=False, using=using)
    return instance


def _set_returned_pk(instance: Model, plan: InsertPlan, value: Any, connection: Any) -> None:
    field = plan.returning[0]
    for converter in plan.converters[0]:
        value = converter(value, field.get_col(type(instance)._meta.db_table), connection)
    setattr(instance, field.attname, value)


def _execute_insert(instance: Model, plan: InsertPlan, params: list[Any], connection: Any) -> None:
    shared = _shared_cursor.get()
    if shared is not None and shared[0] == connection.alias:
        _insert_with(shared[1], instance, plan, params, connection)
    else:
        with connection.cursor() as opened:
            _insert_with(opened, instance, plan, params, connection)


def _insert_with(opened: Any, instance: Model, plan: InsertPlan, params: list[Any], connection: Any) -> None:
    meta: Any = type(instance)._meta
    opened.execute(plan.sql, params)
    if plan.returning:
        if connection.features.can_return_columns_from_insert:
            value = opened.fetchone()[0]
        else:
            value = connection.ops.last_insert_id(opened, meta.db_table, plan.returning[0].column)
        _set_returned_pk(instance, plan, value, connection)


def _read_plan(model: type[Model], using: str) -> _ReadPlan:
    key = (model, using)
    plan = _read_plans.get(key)
    if plan is None:
        connection = connections[using]
        fields: list[Any] = list(model._meta.concrete_fields)
        converters = []
        for index, field in enumerate(fields):
            functions = _converters(field, connection)
            if functions:
                converters.append((index, field.get_col(model._meta.db_table), functions))
        plan = _ReadPlan(
            attnames=tuple(field.attname for field in fields),
            size=len(fields),
            pk_index=[field is model._meta.pk for field in fields].index(True),
            converters=tuple(converters),
        )
        _read_plans[key] = plan
    return plan


def columns(model: type[Model], using: str, alias: str | None = None) -> str:
    """``alias."col1", alias."col2", …`` (unqualified without ``alias``): every concrete column of
    ``model`` in ``concrete_fields`` order, what :func:`from_row` reads, for a hand-written
    ``SELECT`` or ``RETURNING``."""
    qn = connections[using].ops.quote_name
    prefix = f"{qn(alias)}." if alias else ""
    fields: list[Any] = list(model._meta.concrete_fields)
    return ", ".join(f"{prefix}{qn(field.column)}" for field in fields)


def from_row(model: type[M], row: Sequence[Any], start: int, using: str, connection: Any = None) -> M | None:
    """The ``model`` instance in ``row[start:start + len(concrete_fields)]`` (selected with
    :func:`columns`), its values converted as the ORM converts them; None when its primary key
    is NULL (the empty side of a ``LEFT JOIN``). ``connection``: ``connections[using]``, when at hand."""
    plan = _read_plan(model, using)
    values = list(row[start : start + plan.size])
    if values[plan.pk_index] is None:
        return None
    if connection is None:
        connection = connections[using]
    for index, col, converters in plan.converters:
        value = values[index]
        for converter in converters:
            value = converter(value, col, connection)
        values[index] = value
    return model.from_db(using, plan.attnames, values)
