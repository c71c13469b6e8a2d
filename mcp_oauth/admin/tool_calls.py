"""The tool-call audit trail in the admin: read-only, filterable, searchable, exportable, at millions of rows.

Like the client list (:mod:`mcp_oauth.admin.large_lists`): no ``COUNT(*)`` over the table (a
capped count), and nothing that reads every row: the tool and client filters offer the values
of the :data:`FILTER_WINDOW` most recent calls, a search is an exact client ID, tool or trace ID
(an indexed lookup) or else words among the :data:`~mcp_oauth.admin.large_lists.SEARCH_WINDOW`
most recent calls. The export actions stream the selection (every matching row with "select all")
as JSON Lines or CSV (:mod:`mcp_oauth.observability.audit_trail_export`).
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.db.models import Max, Q
from django.http import StreamingHttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from mcp_oauth.admin import large_lists
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.models import ToolCallRecord
from mcp_oauth.observability.audit_trail_export import export_lines, records

__all__ = ["FILTER_WINDOW", "ToolCallRecordAdmin"]

#: The tool and client filters list the values found among this many most recent calls.
FILTER_WINDOW = 50_000
#: Most values a tool or client filter lists.
FILTER_CHOICES = 50
#: An organization admin's tool and client filters list the values of their organizations' this
#: many most recent calls (read newest first from the organization's index).
ORGANIZATION_FILTER_WINDOW = 5_000


class _RecentValuesFilter(admin.SimpleListFilter):
    field = ""

    def lookups(self, request, model_admin):
        if model_admin.organization_scope(request) is not None:  # their organizations' recent calls
            recent = model_admin.get_queryset(request).order_by("-created_at", "-id").values("pk")
            rows = ToolCallRecord.objects.filter(pk__in=recent[:ORGANIZATION_FILTER_WINDOW])
        else:
            newest = ToolCallRecord.objects.aggregate(newest=Max("pk"))["newest"] or 0
            rows = ToolCallRecord.objects.filter(pk__gt=newest - FILTER_WINDOW)
        values = rows.order_by(self.field).values_list(self.field, flat=True).distinct()[:FILTER_CHOICES]
        return [(value, value) for value in values]

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class ToolFilter(_RecentValuesFilter):
    title = _("tool")
    parameter_name = field = "tool"


class ClientFilter(_RecentValuesFilter):
    title = _("client")
    parameter_name = field = "client_id"


@admin.register(ToolCallRecord)
class ToolCallRecordAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Read-only list of the tool calls (no add, change or delete), newest first; an organization
    admin sees their organizations' calls."""

    list_display = (
        "created_at",
        "method",
        "tool",
        "client_id",
        "user",
        "organization",
        "outcome",
        "error_code",
        "duration_ms",
        "era",
    )
    list_filter = ("outcome", "era", ToolFilter, ClientFilter, OrganizationFilter)
    date_hierarchy = "created_at"
    search_fields = ("client_id", "tool", "trace_id", "arguments_digest")
    search_help_text = _(
        "An exact client ID, tool, trace ID or arguments digest; other words are looked for among the "
        "%(window)s most recent calls."
    ) % {"window": f"{large_lists.SEARCH_WINDOW:,}"}
    list_select_related = ("user", "organization")
    show_full_result_count = False
    paginator = large_lists.CappedCountPaginator
    actions = ("export_jsonl", "export_csv")
    fields = (
        "created_at",
        "user",
        "client_id",
        "organization",
        "resource",
        "method",
        "tool",
        "era",
        "protocol_version",
        "outcome",
        "error_code",
        "duration_ms",
        "arguments_digest",
        "arguments_json",
        "trace_id",
    )
    readonly_fields = fields

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        exact = queryset.filter(Q(client_id=term) | Q(tool=term))
        if len(term) == 32:
            exact = queryset.filter(Q(client_id=term) | Q(tool=term) | Q(trace_id=term))
        if exact.exists():
            return exact, False
        newest = ToolCallRecord.objects.aggregate(newest=Max("pk"))["newest"] or 0
        window = queryset.filter(pk__gt=newest - large_lists.SEARCH_WINDOW)
        for word in term.split():
            condition = Q()
            for field in self.search_fields:
                condition |= Q(**{f"{field}__icontains": word})
            window = window.filter(condition)
        return window, False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("arguments"))
    def arguments_json(self, obj):
        if obj.arguments is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(obj.arguments, indent=2, sort_keys=True, ensure_ascii=False))

    def _export(self, queryset, fmt: str, content_type: str):
        response = StreamingHttpResponse(export_lines(records(queryset.order_by()), fmt), content_type=content_type)
        stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
        response["Content-Disposition"] = f'attachment; filename="tool-calls-{stamp}.{fmt}"'
        return response

    @admin.action(description=_("Export the selected tool calls (JSON Lines)"), permissions=["view"])
    def export_jsonl(self, request, queryset):
        return self._export(queryset, "jsonl", "application/jsonl; charset=utf-8")

    @admin.action(description=_("Export the selected tool calls (CSV)"), permissions=["view"])
    def export_csv(self, request, queryset):
        return self._export(queryset, "csv", "text/csv; charset=utf-8")
