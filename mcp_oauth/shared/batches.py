"""Delete or update the rows of a query in bounded batches, walking primary-key ranges.

A retention prune of a table with millions of rows must not load them (``QuerySet.delete()``
collects every instance first when the model has dependents or signal receivers) nor hold one
huge transaction. Here each step reads one primary key through the index (the key
``batch_size`` rows further), then deletes or updates the rows of the query between the
previous key and that one, in its own statement (its own transaction in autocommit): memory and
lock time stay bounded whatever the table's size, and a prune interrupted half-way leaves a
consistent table and is simply resumed by the next run.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

__all__ = ["delete_in_batches", "update_in_batches"]

#: Rows per statement unless told otherwise.
BATCH_SIZE = 5000


def _ranges(queryset: QuerySet, batch_size: int):
    """Yield ``(low, high)`` primary-key bounds (inclusive) covering the rows of ``queryset``, about
    ``batch_size`` rows each, reading one key per step."""
    keys = queryset.order_by("pk").values_list("pk", flat=True)
    low = keys.first()
    while low is not None:
        high = keys.filter(pk__gte=low)[batch_size - 1 : batch_size].first()
        if high is None:
            yield low, None
            return
        yield low, high
        low = keys.filter(pk__gt=high).first()


def delete_in_batches(queryset: QuerySet, batch_size: int | None = None) -> int:
    """Delete the rows of ``queryset``, ``batch_size`` (default :data:`BATCH_SIZE`) at a time by primary-key range.

    Each batch is ``queryset.filter(pk__range).delete()``: the ORM's cascades and signals still
    apply (a model without dependents or receivers is one ``DELETE`` statement).

    :returns: rows of ``queryset``'s model deleted.
    """
    label = queryset.model._meta.label
    deleted = 0
    for low, high in _ranges(queryset, batch_size or BATCH_SIZE):
        rows = queryset.filter(pk__gte=low) if high is None else queryset.filter(pk__gte=low, pk__lte=high)
        _, per_model = rows.delete()
        deleted += per_model.get(label, 0)
    return deleted


def update_in_batches(queryset: QuerySet, batch_size: int | None = None, **values: Any) -> int:
    """``queryset.update(**values)``, ``batch_size`` rows at a time by primary-key range. :returns: rows updated."""
    updated = 0
    for low, high in _ranges(queryset, batch_size or BATCH_SIZE):
        rows = queryset.filter(pk__gte=low) if high is None else queryset.filter(pk__gte=low, pk__lte=high)
        updated += rows.update(**values)
    return updated
