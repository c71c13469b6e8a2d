"""The client list at scale: a public registration endpoint can leave a million rows (issue #28).

* :class:`CappedCountPaginator` counts at most :data:`COUNT_CAP` rows (``SELECT COUNT(*)`` over
  a ``LIMIT``-ed subquery), never the whole table; past the cap the list says "more than" and
  pages up to the cap (narrow it with the filters or a search). With
  ``show_full_result_count = False`` no other count runs.
* :func:`bounded_search` keeps a search from scanning the table: a term that is a ``client_id``
  is looked up by its unique index; other terms are matched (``icontains``) against the
  :data:`SEARCH_WINDOW` most recently registered clients only, a primary-key range the database
  reads from its index.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Max, QuerySet
from django.utils.functional import cached_property

#: At most this many rows are counted for the list (and paged through).
COUNT_CAP = 10_000
#: A search that is not an exact ``client_id`` looks at this many most recent clients.
SEARCH_WINDOW = 20_000


class CappedCountPaginator(Paginator):
    """A paginator whose :attr:`count` is ``min(rows, COUNT_CAP)``, counted over a ``LIMIT COUNT_CAP + 1``
    subquery; :attr:`capped` tells whether more rows exist."""

    cap = COUNT_CAP
    capped = False

    @cached_property
    def count(self) -> int:
        object_list: Any = self.object_list
        if not isinstance(object_list, QuerySet):
            return super().count
        counted = object_list.order_by()[: self.cap + 1].count()
        self.capped = counted > self.cap
        return min(counted, self.cap)


def bounded_search(queryset: QuerySet, term: str, fields: tuple[str, ...]) -> QuerySet:
    """``queryset`` narrowed to the rows whose ``client_id`` is ``term``, or else whose ``fields``
    contain every word of ``term`` (case-insensitive) among the :data:`SEARCH_WINDOW` most recent
    rows (by primary key). An empty ``term`` leaves ``queryset`` as it is."""
    from django.db.models import Q

    term = term.strip()
    if not term:
        return queryset
    exact = queryset.filter(client_id=term)
    if exact.exists():
        return exact
    newest = queryset.model._default_manager.aggregate(newest=Max("pk"))["newest"] or 0
    window = queryset.filter(pk__gt=newest - SEARCH_WINDOW)
    for word in term.split():
        condition = Q()
        for field in fields:
            condition |= Q(**{f"{field}__icontains": word})
        window = window.filter(condition)
    return window


#: Search users by their USERNAME_FIELD (custom user models may have no ``username``).
USER_SEARCH = f"user__{get_user_model().USERNAME_FIELD}"
