"""The admin dashboard: one staff page of charts read at a glance (issue #30).

Linked from the admin index as "MCP dashboard" (a proxy of :class:`~mcp_oauth.models.ToolCallRecord`,
so it sits in the app's list with its own view permission). For a range of the last hour, day or
week (``?range=1h|24h|7d``):

* tool calls per bucket (minute, hour, hour) with their errors (``error``, ``tool_error``), from the
  tool-call audit trail, and the top tools and clients;
* grants by grant type (``token.issued`` audit events) and refusals by reason (the refusal kinds of
  the audit log);
* panels other apps add through :data:`mcp_oauth.signals.admin_dashboard` (the ``elicitation``
  app: the completion rate of its elicitations);
* MCP tasks in flight (``working``, ``input_required``).

Every query is an aggregate over an indexed time range (``created_at``) or an indexed status: the
page costs the same with a million rows of history as with ten. Charts are server-rendered SVG
(:mod:`mcp_oauth.admin.dashboard_charts`) in overridable templates, each with a table of its figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Count, Q
from django.db.models.functions import Trunc
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import get_application_model

from mcp_oauth.admin.dashboard_charts import column_chart, hbars
from mcp_oauth.models import AuditEvent, McpTask, ToolCallDashboard
from mcp_oauth.models.tool_calls import ToolCallRecord
from mcp_oauth.signals import admin_dashboard

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

__all__ = ["RANGES", "REFUSAL_KINDS", "DashboardAdmin", "dashboard_context"]


@dataclass(frozen=True)
class Range:
    label: StrOrPromise
    span: timedelta
    bucket: str  # a Trunc kind
    step: timedelta


#: The ranges the page offers (``?range=``), the first is the default.
RANGES: dict[str, Range] = {
    "1h": Range(_("last hour"), timedelta(hours=1), "minute", timedelta(minutes=1)),
    "24h": Range(_("last 24 hours"), timedelta(hours=24), "hour", timedelta(hours=1)),
    "7d": Range(_("last 7 days"), timedelta(days=7), "hour", timedelta(hours=1)),
}

#: The audit-log kinds that are refusals, charted by kind ("refusals by reason").
REFUSAL_KINDS = (
    AuditEvent.Kind.CONSENT_DENIED,
    AuditEvent.Kind.TRUST_DENIED,
    AuditEvent.Kind.INVALID_RESOURCE,
    AuditEvent.Kind.CODE_REPLAY,
    AuditEvent.Kind.REFRESH_TOKEN_REUSE,
    AuditEvent.Kind.PKCE_CHALLENGE_REUSED,
    AuditEvent.Kind.ASSERTION_REFUSED,
    AuditEvent.Kind.ASSERTION_REPLAYED,
    AuditEvent.Kind.CIMD_SSRF_REFUSED,
    AuditEvent.Kind.CIMD_FETCH_FAILED,
    AuditEvent.Kind.IDENTITY_MISMATCH,
)

#: Rows of the "top" charts.
TOP = 10

ERRORS = Q(outcome__in=[ToolCallRecord.Outcome.ERROR, ToolCallRecord.Outcome.TOOL_ERROR])


def _floor(moment: datetime, step: timedelta) -> datetime:
    local = timezone.localtime(moment)
    if step >= timedelta(hours=1):
        return local.replace(minute=0, second=0, microsecond=0)
    return local.replace(second=0, microsecond=0)


def _series(since: datetime, now: datetime, chosen: Range) -> list[tuple[str, int, int]]:
    counted = {
        timezone.localtime(row["bucket"]).replace(tzinfo=None): (row["calls"], row["errors"])
        for row in ToolCallRecord.objects.filter(created_at__gte=since, created_at__lte=now)
        .annotate(bucket=Trunc("created_at", chosen.bucket))
        .values("bucket")
        .annotate(calls=Count("id"), errors=Count("id", filter=ERRORS))
        .order_by()
    }
    buckets = round(chosen.span / chosen.step)
    last = _floor(now, chosen.step)
    series = []
    if chosen.step < timedelta(hours=1):
        label_format = "%H:%M"
    elif chosen.span <= timedelta(days=1):
        label_format = "%a %H:00"
    else:  # a week: the weekday alone names the first and the last column alike
        label_format = "%a %d %b %H:00"
    for index in range(buckets - 1, -1, -1):
        start = last - chosen.step * index
        calls, errors = counted.get(start.replace(tzinfo=None), (0, 0))
        series.append((start.strftime(label_format), calls, errors))
    return series


def _top(queryset, field: str) -> list[tuple[str, int]]:
    rows = queryset.values(field).annotate(n=Count("id")).order_by("-n", field)[:TOP]
    return [(row[field] or "-", row["n"]) for row in rows]


def _top_clients(queryset) -> list[tuple[str, int, str]]:
    """The top clients as ``(name, calls, client_id)``: the registered name an operator knows
    (one query for at most :data:`TOP` IDs), the ID beside it; a client since deleted keeps its ID
    as its label."""
    rows = _top(queryset, "client_id")
    names = dict(
        get_application_model()
        .objects.filter(client_id__in=[client for client, _ in rows])
        .values_list("client_id", "name")
    )
    return [(names[client], calls, client) if names.get(client) else (client, calls, "") for client, calls in rows]


def dashboard_context(range_key: str, now: datetime | None = None) -> dict[str, Any]:
    """The figures of the page for ``range_key`` (one of :data:`RANGES`; unknown: the first)."""
    now = now or timezone.now()
    if range_key not in RANGES:
        range_key = next(iter(RANGES))
    chosen = RANGES[range_key]
    since = now - chosen.span
    calls = ToolCallRecord.objects.filter(created_at__gte=since, created_at__lte=now)
    events = AuditEvent.objects.filter(created_at__gte=since, created_at__lte=now)
    grants = [
        (row["detail__grant_type"] or "-", row["n"])
        for row in events.filter(kind=AuditEvent.Kind.TOKEN_ISSUED)
        .values("detail__grant_type")
        .annotate(n=Count("id"))
        .order_by("-n")[:TOP]
    ]
    labels = dict(AuditEvent.Kind.choices)
    refusals = [
        (str(labels.get(row["kind"], row["kind"])), row["n"])
        for row in events.filter(kind__in=REFUSAL_KINDS).values("kind").annotate(n=Count("id")).order_by("-n", "kind")
    ]
    in_flight = dict(
        McpTask.objects.filter(status__in=[McpTask.Status.WORKING, McpTask.Status.INPUT_REQUIRED])
        .values("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    panels: list[dict[str, Any]] = []
    admin_dashboard.send(sender=None, since=since, until=now, panels=panels)
    series = _series(since, now, chosen)
    minutes = chosen.step / timedelta(minutes=1)
    chart = column_chart(series)
    return {
        "range_key": range_key,
        "range": chosen,
        "ranges": [(key, value.label) for key, value in RANGES.items()],
        "since": since,
        "until": now,
        "calls": chart,
        "bucket_minutes": int(minutes),
        "per_minute": round(chart.total / (chosen.span / timedelta(minutes=1)), 2),
        # the average per column's unit (per minute over the last hour, per hour over a day or a
        # week): a week's calls per minute would round to 0.0
        "per_column": round(chart.total / len(series), 2) if series else 0.0,
        "top_tools": hbars(_top(calls, "tool")),
        "top_clients": hbars(_top_clients(calls)),
        "grants": hbars(grants),
        "refusals": hbars(refusals),
        "tasks_working": in_flight.get(McpTask.Status.WORKING, 0),
        "tasks_input_required": in_flight.get(McpTask.Status.INPUT_REQUIRED, 0),
        "panels": panels,
    }


@admin.register(ToolCallDashboard)
class DashboardAdmin(admin.ModelAdmin):
    """The dashboard as the change list of its proxy model: listed on the admin index, staff only
    (the admin's login for anyone else), viewable with the ``view`` permission of the proxy or of
    tool calls."""

    template = "admin/mcp_oauth/dashboard.html"

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) or request.user.has_perm("mcp_oauth.view_toolcallrecord")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_urls(self):
        """The page only: the proxy's rows are tool calls, which have their own admin, so no
        ``<pk>/change/``, ``history/`` or ``add/`` here (they answer 404, not a tool call titled
        "View MCP dashboard")."""
        info = self.opts.app_label, self.opts.model_name
        return [path("", self.admin_site.admin_view(self.changelist_view), name="{}_{}_changelist".format(*info))]

    def changelist_view(self, request, extra_context=None):
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            **dashboard_context(request.GET.get("range", "")),
            "opts": self.model._meta,
            "title": _("MCP dashboard"),
        }
        return TemplateResponse(request, self.template, context)
