"""Admin screens of the MCP server's state: sessions and Tasks (with the cancel action).
Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

from django.contrib import admin, messages

from mcp_oauth.admin.large_lists import USER_SEARCH
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.mcp_server.mcp_tasks.store import cancel_task
from mcp_oauth.models import (
    McpSession,
    McpTask,
)

# --- MCP sessions ------------------------------------------------------------------------


@admin.register(McpSession)
class McpSessionAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    list_display = (
        "short_id",
        "user",
        "application",
        "resource",
        "organization",
        "protocol_version",
        "created_at",
        "last_seen_at",
        "ended_at",
    )
    list_filter = ("protocol_version", "ended_at", OrganizationFilter)
    list_select_related = ("user", "application", "resource", "organization")
    search_fields = (USER_SEARCH, "application__name", "application__client_id")
    readonly_fields = [f.name for f in McpSession._meta.fields]

    @admin.display(description="session")
    def short_id(self, obj):
        return obj.id[:8] + "…"

    def has_add_permission(self, request):
        return False


# --- MCP tasks (io.modelcontextprotocol/tasks) -----------------------------------------------


@admin.register(McpTask)
class McpTaskAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Tasks with their status, owner, client and timings; the action cancels them (cooperatively:
    a running tool is cancelled at its executor's next check, a queued one never starts). An
    organization admin sees and cancels their organizations' Tasks."""

    organization_admin_permissions = frozenset({"view", "change"})

    list_display = (
        "short_id",
        "tool_name",
        "status",
        "user",
        "application",
        "organization",
        "created_at",
        "started_at",
        "finished_at",
        "attempts",
    )
    list_filter = ("status", "tool_name", OrganizationFilter)
    list_select_related = ("user", "application", "organization")
    search_fields = ("task_id", "tool_name", USER_SEARCH, "application__name", "application__client_id")
    readonly_fields = [f.name for f in McpTask._meta.fields if f.name not in ("result", "sealed_result")]
    exclude = ("result", "sealed_result")
    actions = ["cancel_tasks"]

    @admin.display(description="task")
    def short_id(self, obj):
        return obj.task_id[:8] + "…"

    @admin.action(description="Cancel the selected tasks")
    def cancel_tasks(self, request, queryset):
        cancelled = sum(cancel_task(task, reason="An administrator cancelled the task.") for task in queryset)
        self.message_user(request, f"{cancelled} task(s) cancelled.", messages.SUCCESS)

    def has_add_permission(self, request):
        return False
