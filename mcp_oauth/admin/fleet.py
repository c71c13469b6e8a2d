"""Admin screen of the fleet's shared secrets (:class:`~mcp_oauth.models.FleetSecret`): which
settings the hosts share, how many keys each ring has, which host recorded it last and when.
Read-only; deleting a row makes the next host to start record its ring anew (as
``check_fleet_config --replace`` does). Fingerprints are not shown (they reveal nothing, and say
nothing to a person either). Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from mcp_oauth.models import FleetSecret


@admin.register(FleetSecret)
class FleetSecretAdmin(admin.ModelAdmin):
    """The fleet's record of each shared secret setting (docs/how-to/many-hosts.md)."""

    list_display = ("setting", "keys", "host", "updated_at")
    fields = ("setting", "keys", "host", "updated_at")
    readonly_fields = fields
    ordering = ("setting",)

    @admin.display(description=_("keys in the ring"))
    def keys(self, obj: FleetSecret) -> int:
        return len(obj.fingerprints)

    def has_add_permission(self, request: Any) -> bool:
        return False  # recorded by the hosts at start (manage.py check_fleet_config)

    def has_change_permission(self, request: Any, obj: FleetSecret | None = None) -> bool:
        return False
