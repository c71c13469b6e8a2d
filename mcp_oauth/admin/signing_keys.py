"""Admin screen of the JWT access-token signing keys (:class:`~mcp_oauth.models.AccessTokenSigningKey`):
each key's id, algorithm and schedule (published, signing, retired). Read-only but for
``retire_at`` (retire a key at once after a compromise: its tokens are refused from then on);
keys are created by ``manage.py rotate_access_token_keys``. The private key is never shown.
Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from mcp_oauth.models import AccessTokenSigningKey


@admin.register(AccessTokenSigningKey)
class AccessTokenSigningKeyAdmin(admin.ModelAdmin):
    """The signing keys of JWT access tokens (docs/how-to/jwt-access-tokens.md)."""

    list_display = ("kid", "alg", "state", "signs_from", "retire_at", "created_at")
    fields = ("kid", "alg", "public_jwk", "signs_from", "retire_at", "created_at")
    readonly_fields = ("kid", "alg", "public_jwk", "signs_from", "created_at")

    @admin.display(description=_("state"))
    def state(self, obj: AccessTokenSigningKey) -> str:
        now = timezone.now()
        if obj.retire_at is not None and obj.retire_at <= now:
            return str(_("retired"))
        if obj.signs_from > now:
            return str(_("published, not signing yet"))
        return str(_("published"))

    def has_add_permission(self, request: Any) -> bool:
        return False  # manage.py rotate_access_token_keys
