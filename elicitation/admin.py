"""Admin of the elicitation app: elicitations (a log), providers, connections (revoke), stored secrets.

No page ever shows a token, a client secret or a stored value: the encrypted columns are not
editable and not listed, and the provider's client secret is a write-only field.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.utils.translation import gettext_lazy as _

from elicitation.crypto import keys_configured
from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from elicitation.providers import ProviderError, discover, revoke_connection
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin


@admin.register(Elicitation)
class ElicitationAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """A log: listed, filtered and searched, never added or edited by hand; an organization admin
    sees their organizations' elicitations."""

    list_display = (
        "elicitation_id",
        "mode",
        "kind",
        "status",
        "user",
        "organization",
        "short_message",
        "created_at",
        "completed_at",
    )
    list_filter = ("status", "mode", "kind", ("user", admin.RelatedOnlyFieldListFilter), OrganizationFilter)
    search_fields = ("elicitation_id", "message", "user__username", "request_id")
    date_hierarchy = "created_at"
    list_select_related = ("user", "organization")
    exclude = ("client_answer",)
    readonly_fields = tuple(field.name for field in Elicitation._meta.fields if field.name != "client_answer")

    @admin.display(description=_("message"))
    def short_message(self, obj: Elicitation) -> str:
        return obj.message if len(obj.message) <= 80 else obj.message[:79] + "…"

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


class ThirdPartyProviderForm(forms.ModelForm):
    """The provider with a write-only client secret (left blank: the stored one is kept)."""

    new_client_secret = forms.CharField(
        label=_("client secret"),
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=_("Stored encrypted; never shown again. Leave blank to keep the current one."),
    )
    clear_client_secret = forms.BooleanField(label=_("remove the stored client secret"), required=False)

    class Meta:
        model = ThirdPartyProvider
        fields = "__all__"

    def clean(self):
        cleaned = super().clean()
        assert cleaned is not None  # ModelForm.clean() returns cleaned_data
        issuer = cleaned.get("issuer")
        if issuer and not (cleaned.get("authorization_endpoint") and cleaned.get("token_endpoint")) and not self.errors:
            # Only the issuer given: read the endpoints from its RFC 8414 metadata now.
            probe = ThirdPartyProvider(issuer=issuer, use_pkce=cleaned.get("use_pkce", True))
            try:
                discover(probe, save=False)
            except ProviderError as exc:
                raise forms.ValidationError(
                    _("Could not discover the endpoints from the issuer: %(error)s"), params={"error": exc}
                ) from exc
            for field in ("authorization_endpoint", "token_endpoint", "revocation_endpoint", "iss_parameter_supported"):
                cleaned[field] = getattr(probe, field)
                setattr(self.instance, field, cleaned[field])
            if probe.userinfo_endpoint and not cleaned.get("userinfo_endpoint"):
                cleaned["userinfo_endpoint"] = self.instance.userinfo_endpoint = probe.userinfo_endpoint
        if cleaned.get("new_client_secret") and cleaned.get("clear_client_secret"):
            raise forms.ValidationError(_("Either enter a new client secret or remove the stored one, not both."))
        if cleaned.get("new_client_secret") and not cleaned.get("clear_client_secret") and not keys_configured():
            raise forms.ValidationError(_('Set ELICITATION["ENCRYPTION_KEYS"] before storing a client secret.'))
        return cleaned

    def save(self, commit: bool = True):
        provider = super().save(commit=False)
        if self.cleaned_data.get("clear_client_secret"):
            provider.client_secret = ""
        elif self.cleaned_data.get("new_client_secret"):
            provider.client_secret = self.cleaned_data["new_client_secret"]
        if commit:
            provider.save()
        return provider


@admin.register(ThirdPartyProvider)
class ThirdPartyProviderAdmin(admin.ModelAdmin):
    """Providers: endpoints (or discovery from the issuer), client credentials, scopes.

    Saving a provider with an issuer and no authorization/token endpoints discovers them (RFC 8414)
    first; the "Discover endpoints" action refreshes them for saved providers.
    """

    form = ThirdPartyProviderForm
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    list_display = ("name", "slug", "host", "enabled", "has_client_secret", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("name", "slug", "issuer", "client_id")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("redirect_uri_to_register", "created_at", "updated_at")
    actions = ("discover_endpoints",)
    fieldsets = (
        (None, {"fields": ("name", "slug", "enabled", "redirect_uri_to_register")}),
        (
            _("Authorization server"),
            {
                "fields": (
                    "issuer",
                    "authorization_endpoint",
                    "token_endpoint",
                    "revocation_endpoint",
                    "userinfo_endpoint",
                    "iss_parameter_supported",
                )
            },
        ),
        (
            _("This site as its client"),
            {
                "fields": (
                    "client_id",
                    "new_client_secret",
                    "clear_client_secret",
                    "token_endpoint_auth_method",
                    "use_pkce",
                    "scopes",
                    "resource",
                )
            },
        ),
        (None, {"fields": ("created_at", "updated_at")}),
    )

    @admin.display(description=_("redirect URI to register at the provider"))
    def redirect_uri_to_register(self, obj: ThirdPartyProvider) -> str:
        return obj.redirect_uri if obj.pk and obj.slug else str(_("(saved providers only)"))

    @admin.display(description=_("client secret"), boolean=True)
    def has_client_secret(self, obj: ThirdPartyProvider) -> bool:
        return bool(obj.client_secret_encrypted)

    @admin.action(description=_("Discover endpoints from the issuer (RFC 8414)"), permissions=["change"])
    def discover_endpoints(self, request, queryset) -> None:
        for provider in queryset:
            try:
                discover(provider)
            except ProviderError as exc:
                self.message_user(request, f"{provider}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{provider}: endpoints updated", messages.SUCCESS)


@admin.register(ThirdPartyConnection)
class ThirdPartyConnectionAdmin(admin.ModelAdmin):
    """Users' connections: who, which provider, account, scopes, expiry. Tokens never appear."""

    list_display = ("user", "provider", "account_label", "scopes", "expires_at", "last_used_at", "created_at")
    list_filter = ("provider",)
    search_fields = ("user__username", "account_label", "provider__name")
    list_select_related = ("user", "provider")
    fields = (
        "user",
        "provider",
        "account_label",
        "scopes",
        "token_type",
        "expires_at",
        "created_at",
        "updated_at",
        "last_used_at",
    )
    readonly_fields = fields
    actions = ("revoke_connections",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def get_actions(self, request, action_location: Any = None):
        # Django 6.1 passes where the actions are shown (and warns about an override without the
        # parameter); Django 5.2 and 6.0 have no such parameter.
        where = {} if action_location is None else {"action_location": action_location}
        actions = super().get_actions(request, **where)
        actions.pop("delete_selected", None)  # revoking also tells the provider and writes the audit log
        return actions

    def delete_view(self, request, object_id, extra_context=None):
        # Django runs a POST to the delete page in a transaction; deleting a connection first asks the
        # provider to revoke its tokens (an HTTP request), which must not hold that transaction open
        # (with SQLite, a provider that is this very site could not write and revocation timed out).
        # The local deletion and its audit event are atomic in revoke_connection.
        if request.method == "POST":
            return self._delete_view(request, object_id, extra_context)  # type: ignore[attr-defined]  # Django's, without the transaction
        return super().delete_view(request, object_id, extra_context)

    def delete_model(self, request, obj: ThirdPartyConnection) -> None:
        revoke_connection(obj, request=request, actor=request.user, reason="revoked in the admin")

    @admin.action(description=_("Revoke the selected connections"), permissions=["delete"])
    def revoke_connections(self, request, queryset) -> None:
        count = 0
        for connection in queryset.select_related("provider", "user"):
            revoke_connection(connection, request=request, actor=request.user, reason="revoked in the admin")
            count += 1
        self.message_user(request, f"{count} connection(s) revoked.", messages.SUCCESS)


@admin.register(StoredSecret)
class StoredSecretAdmin(admin.ModelAdmin):
    """Values typed on the secure input page: listed and deletable, never shown."""

    list_display = ("user", "name", "updated_at")
    search_fields = ("user__username", "name")
    list_select_related = ("user",)
    fields = ("user", "name", "created_at", "updated_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
