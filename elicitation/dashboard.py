"""The elicitation panel of the admin dashboard (:mod:`mcp_oauth.admin.dashboard`).

Connected in :meth:`elicitation.apps.ElicitationConfig.ready` to
:data:`mcp_oauth.signals.admin_dashboard` (mcp_oauth never imports this app): the elicitations
created in the dashboard's range, by status, and their completion rate, the share that ended with
the user's answer (``accepted``: a form answered; ``completed``: a URL interaction finished) among
those that ended (pending ones are left out). One grouped query; the table is bounded by
``ELICITATION["RETENTION_DAYS"]``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Count
from django.utils.translation import gettext as _

from elicitation.models import Elicitation

__all__ = ["add_panel"]

SUCCEEDED = (Elicitation.Status.ACCEPTED, Elicitation.Status.COMPLETED)


def add_panel(sender: Any, since: datetime, until: datetime, panels: list[dict[str, Any]], **kwargs: Any) -> None:
    """Receiver of ``admin_dashboard``: append the ``elicitation`` panel."""
    counts = dict(
        Elicitation.objects.filter(created_at__gte=since, created_at__lte=until)
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    labels = dict(Elicitation.Status.choices)
    ended = sum(n for status, n in counts.items() if status != Elicitation.Status.PENDING)
    succeeded = sum(counts.get(status, 0) for status in SUCCEEDED)
    panels.append(
        {
            "id": "elicitation",
            "title": _("Elicitations"),
            "figures": [(str(labels[status]), counts.get(status, 0)) for status in Elicitation.Status.values],
            "ratio": (succeeded, ended),
            "ratio_label": _("completion rate (accepted or completed, of those ended)"),
        }
    )
