"""Admin screens of tokens and consents: protected resources (the tokens' audiences), DPoP key
bindings, consents; DOT's token screens re-registered for the owner's cascade.

Tokens are only counted or listed, never displayed. Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import F, Func, OuterRef, Subquery
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.admin.cascade import CascadeDeletable, reregister_cascade_deletable
from mcp_oauth.admin.large_lists import USER_SEARCH
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.audit import record
from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.models import (
    AuditEvent,
    Consent,
    DPoPBinding,
    ProtectedResource,
    TokenActor,
)


@admin.register(ProtectedResource)
class ProtectedResourceAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """The protected resources (the tokens' audiences); an organization admin sees their
    organizations' own endpoints, read-only (site-wide resources are the site's)."""

    list_display = (
        "uri",
        "name",
        "organization",
        "scopes",
        "is_default",
        "enabled",
        "dpop_required",
        "jwt_access_tokens",
    )
    list_filter = ("is_default", "enabled", "dpop_required", "jwt_access_tokens", OrganizationFilter)
    list_select_related = ("organization",)
    search_fields = ("uri", "name")


@admin.register(TokenActor)
class TokenActorAdmin(admin.ModelAdmin):
    """The actors (RFC 8693 §4.1 ``act``) of tokens issued by token exchange for another resource:
    read-only, written by the token endpoint (the tokens are only named by their checksums)."""

    list_display = ("__str__", "created_at", "expires")
    search_fields = ("=token_checksum", "=subject_token_checksum")
    readonly_fields = ("token_checksum", "act", "subject_token_checksum", "created_at", "expires")
    show_full_result_count = False

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DPoPBinding)
class DPoPBindingAdmin(admin.ModelAdmin):
    """The DPoP key bindings of issued tokens (RFC 9449 §6): read-only, written by the token endpoint."""

    list_display = ("token_kind", "jkt", "created_at", "expires")
    list_filter = ("token_kind",)
    search_fields = ("jkt",)
    readonly_fields = ("token_checksum", "jkt", "token_kind", "created_at", "expires")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


# DOT's token screens refuse deletion (revoke instead); the rows still go with their user or client.
for _token_model in (get_access_token_model(), get_refresh_token_model(), get_grant_model(), get_id_token_model()):
    reregister_cascade_deletable(_token_model)


# --- consents ----------------------------------------------------------------------------


class ConsentStateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", _("active")), ("revoked", _("revoked"))]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(Consent)
class ConsentAdmin(OrganizationScopedAdmin, CascadeDeletable, admin.ModelAdmin):
    """Who let which client act for them; "revoke" also revokes the client's tokens for that user.
    An organization admin sees and revokes the grants of their organizations."""

    organization_admin_permissions = frozenset({"view", "change"})

    list_display = (
        "user",
        "application",
        "organization",
        "scope",
        "granted_at",
        "last_granted_at",
        "revoked_at",
        "live_tokens",
    )
    list_filter = (
        ConsentStateFilter,
        OrganizationFilter,
        "application__registration_source",
        ("last_granted_at", admin.DateFieldListFilter),
    )
    search_fields = (USER_SEARCH, "application__name", "application__client_id", "scope")
    list_select_related = ("user", "application", "organization")
    readonly_fields = (
        "user",
        "application",
        "organization",
        "scope",
        "resources",
        "granted_at",
        "last_granted_at",
        "revoked_at",
        "live_tokens",
    )
    fields = readonly_fields
    actions = ("revoke_consents",)

    def has_add_permission(self, request):
        return False  # consents come from the consent page

    def own_delete_permission(self, request, obj=None):
        return False  # revoke instead, so the tokens go too; the rows go with their user (CascadeDeletable)

    def get_queryset(self, request):
        # The live tokens counted in the same query (one subquery per listed row, not one query each).
        live = (
            get_access_token_model()
            .objects.filter(user_id=OuterRef("user_id"), application_id=OuterRef("application_id"))
            .filter(expires__gt=timezone.now())
            .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
            .order_by()
            .annotate(count=Func(F("pk"), function="COUNT"))
            .values("count")
        )
        return super().get_queryset(request).annotate(live_token_count=Subquery(live))

    @admin.display(description=_("live access tokens"))
    def live_tokens(self, obj):
        counted = getattr(obj, "live_token_count", None)
        if counted is not None:
            return counted
        return (
            get_access_token_model()
            .objects.filter(user_id=obj.user_id, application_id=obj.application_id, expires__gt=timezone.now())
            .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
            .count()
        )

    @admin.action(description=_("Revoke the selected consents and their tokens"), permissions=["change"])
    def revoke_consents(self, request, queryset):
        total = 0
        consents = list(queryset.select_related("user", "application"))
        for consent in consents:
            # Only the connection this consent stands for: the user's tokens for the client acting for
            # another organization (or for none) are not this consent's, nor this admin's to revoke.
            count = revoke_user_grants(
                consent.user, consent.application, reason="admin_revoked", organization=consent.organization
            )
            total += count
            record(
                AuditEvent.Kind.TOKEN_REVOKED,
                request=request,
                user=consent.user,
                client_id=consent.application.client_id,
                detail={"via": "admin", "action": "revoke consent", "count": count},
                organization=consent.organization_id,
            )
        self.message_user(
            request,
            ngettext(
                "Revoked %(n)d consent (%(tokens)d tokens).",
                "Revoked %(n)d consents (%(tokens)d tokens).",
                len(consents),
            )
            % {"n": len(consents), "tokens": total},
            messages.SUCCESS,
        )
