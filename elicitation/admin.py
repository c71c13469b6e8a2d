"""Read-only admin of the elicitations the server sent."""

from django.contrib import admin

from .models import Elicitation


@admin.register(Elicitation)
class ElicitationAdmin(admin.ModelAdmin):
    """A log: listed, filtered and searched, never added or edited by hand."""

    list_display = ("elicitation_id", "mode", "status", "user", "short_message", "created_at", "completed_at")
    list_filter = ("status", "mode", ("user", admin.RelatedOnlyFieldListFilter))
    search_fields = ("elicitation_id", "message", "user__username", "request_id")
    date_hierarchy = "created_at"
    list_select_related = ("user",)
    readonly_fields = tuple(field.name for field in Elicitation._meta.fields)

    @admin.display(description="message")
    def short_message(self, obj: Elicitation) -> str:
        return obj.message if len(obj.message) <= 80 else obj.message[:79] + "…"

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
