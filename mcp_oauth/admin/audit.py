"""Admin screen of the audit log: read-only, filterable and searchable; details never hold credentials.
Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from mcp_oauth.admin.large_lists import USER_SEARCH
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.models import (
    AuditEvent,
)

# --- audit log ---------------------------------------------------------------------------


@admin.register(AuditEvent)
class AuditEventAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """The audit log: read-only (no add, change or delete), filterable and searchable; an organization
    admin sees their organizations' events."""

    list_display = ("created_at", "kind", "user", "client_id", "organization", "ip_address", "summary")
    list_filter = ("kind", OrganizationFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("client_id", USER_SEARCH, "ip_address")
    date_hierarchy = "created_at"
    list_select_related = ("user", "organization")
    fields = ("created_at", "kind", "user", "client_id", "organization", "ip_address", "detail_json")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description=_("detail"))
    def summary(self, obj):
        text = ", ".join(f"{key}={value}" for key, value in (obj.detail or {}).items() if value not in (None, "", []))
        return text if len(text) <= 120 else text[:119] + "…"

    @admin.display(description=_("detail"))
    def detail_json(self, obj):
        return format_html("<pre>{}</pre>", json.dumps(obj.detail, indent=2, sort_keys=True, ensure_ascii=False))
