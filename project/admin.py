from django.contrib import admin

from .models import Note


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    """Editing a note here notifies the owner's MCP sessions subscribed to ``notes://<pk>``."""

    list_display = ("title", "owner", "updated_at")
    list_filter = ("owner",)
    search_fields = ("title", "body")
    autocomplete_fields = ("owner",)
