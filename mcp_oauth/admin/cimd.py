"""Admin screen of the CIMD cache: the client metadata documents fetched, their state and actions.
Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_oauth.authorization_server.cimd import cache as cimd_cache
from mcp_oauth.models import (
    ClientMetadataDocument,
)

# --- CIMD cache ----------------------------------------------------------------------------


class DocumentStateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [
            ("fresh", _("fresh")),
            ("expired", _("expired")),
            ("failing", _("last fetch failed")),
            ("never", _("no valid document")),
        ]

    def queryset(self, request, queryset):
        now = timezone.now()
        value = self.value()
        if value == "fresh":
            return queryset.filter(document__isnull=False, expires_at__gt=now)
        if value == "expired":
            return queryset.filter(document__isnull=False, expires_at__lte=now)
        if value == "failing":
            return queryset.exclude(last_error="")
        if value == "never":
            return queryset.filter(document__isnull=True)
        return queryset


@admin.register(ClientMetadataDocument)
class ClientMetadataDocumentAdmin(admin.ModelAdmin):
    """The CIMD cache (one row per client_id URL); entries come from fetches, "refresh now" re-fetches them."""

    list_display = (
        "client_id",
        "application",
        "fresh",
        "fetched_at",
        "expires_at",
        "last_error",
        "last_error_at",
        "fetch_count",
    )
    list_filter = (DocumentStateFilter, ("fetched_at", admin.DateFieldListFilter))
    search_fields = ("client_id", "last_error", "application__name")
    list_select_related = ("application",)
    fields = (
        "client_id",
        "application",
        "document_json",
        "etag",
        "last_modified",
        "fetched_at",
        "expires_at",
        "last_error",
        "last_error_at",
        "retry_after",
        "fetch_count",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields
    actions = ("refresh_now",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description=_("fresh"), boolean=True)
    def fresh(self, obj):
        return obj.is_fresh(timezone.now())

    @admin.display(description=_("validated document"))
    def document_json(self, obj):
        if obj.document is None:
            return "-"
        return format_html("<pre>{}</pre>", json.dumps(obj.document, indent=2, sort_keys=True, ensure_ascii=False))

    def has_refresh_permission(self, request):
        """The "refresh now" action: for those who may change cache entries (the change form itself is read-only)."""
        opts = self.opts
        return request.user.has_perm(f"{opts.app_label}.change_{opts.model_name}")

    @admin.action(description=_("Refresh now (fetch the documents again)"), permissions=["refresh"])
    def refresh_now(self, request, queryset):
        started = busy = 0
        for entry in queryset:
            # An administrator's request overrides the failure back-off.
            type(entry).objects.filter(pk=entry.pk).update(retry_after=None)
            entry.retry_after = None
            if cimd_cache.start_fetch(entry, None, refresh=entry.document is not None):
                started += 1
            else:
                busy += 1
        self.message_user(
            request,
            ngettext("Refresh started for %d document.", "Refresh started for %d documents.", started) % started,
            messages.SUCCESS,
        )
        if busy:
            self.message_user(
                request,
                ngettext("%d document is already being fetched.", "%d documents are already being fetched.", busy)
                % busy,
                messages.WARNING,
            )
