"""Elicitations in the Prometheus metrics (``mcp_elicitations_total``), counted through
:func:`mcp_oauth.observability.metrics.count_elicitation`; connected by :meth:`ElicitationConfig.ready`.

A row created counts ``requested`` (by mode); a row saved with its ``status`` out of ``pending``
counts that status (``accepted``, ``declined``, ``cancelled``, ``invalid``, ``completed``,
``failed``). Statuses written in bulk (``expired`` by the expiry task, a form answer of the
2026-07-28 era recorded from its ``requestState``) change rows without saving them and are not
counted. With metrics off the receiver returns at once.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save

from elicitation.models import Elicitation
from mcp_oauth.observability import metrics

__all__ = ["connect", "count_saved"]


def count_saved(sender: Any, instance: Elicitation, created: bool, update_fields: Any = None, **kwargs: Any) -> None:
    if metrics.active() is None:
        return
    if created:
        metrics.count_elicitation(instance.mode, "requested")
        if instance.status == Elicitation.Status.PENDING:
            return
    elif update_fields is not None and "status" not in update_fields:
        return
    if instance.status != Elicitation.Status.PENDING:
        metrics.count_elicitation(instance.mode, instance.status)


def connect() -> None:
    post_save.connect(count_saved, sender=Elicitation, dispatch_uid="elicitation.metrics.count_saved")
