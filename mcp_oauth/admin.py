"""Admin screens of the foundation: protected resources, client profiles (inline on DOT's
Application) and MCP sessions. No secret or token is ever displayed."""

from django.contrib import admin
from django.db import models
from oauth2_provider.models import get_application_model

from .models import ClientProfile, McpSession, ProtectedResource


@admin.register(ProtectedResource)
class ProtectedResourceAdmin(admin.ModelAdmin):
    list_display = ("uri", "name", "scopes", "is_default", "enabled")
    list_filter = ("is_default", "enabled")
    search_fields = ("uri", "name")


class ClientProfileInline(admin.StackedInline):
    model = ClientProfile
    can_delete = False
    extra = 0
    readonly_fields = ("metadata", "last_used_at")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}


Application = get_application_model()
if admin.site.is_registered(Application):
    _base = type(admin.site._registry[Application])
    admin.site.unregister(Application)

    @admin.register(Application)
    class ApplicationWithProfileAdmin(_base):
        inlines = [*getattr(_base, "inlines", []), ClientProfileInline]


@admin.register(McpSession)
class McpSessionAdmin(admin.ModelAdmin):
    list_display = ("short_id", "user", "application", "resource", "protocol_version", "created_at", "last_seen_at", "ended_at")
    list_filter = ("protocol_version", "ended_at")
    search_fields = ("user__username", "application__name", "application__client_id")
    readonly_fields = [f.name for f in McpSession._meta.fields]

    @admin.display(description="session")
    def short_id(self, obj):
        return obj.id[:8] + "…"

    def has_add_permission(self, request):
        return False
