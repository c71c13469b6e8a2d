"""Admin screens of signed-assertion trust: enterprise identity providers (ID-JAG issuers) and the
identities linked to local users. Imported by :mod:`mcp_oauth.admin`.

The forms refuse what the token endpoint could never use: a key set holding private or symmetric
key material, an IdP with neither ``jwks`` nor an https ``jwks_uri``, algorithms that are not
accepted (``none``, HS*). Saving a provider drops its cached key set.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import models
from django.utils.translation import gettext_lazy as _

from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.authorization_server.client_auth import jwks as jwks_cache
from mcp_oauth.authorization_server.client_auth.assertions import accepted_algorithms
from mcp_oauth.models import EnterpriseIdentity, EnterpriseIdentityProvider, OrganizationClient


def clean_key_set(value: Any) -> Any:
    """An inline JWK Set as the admin may store it (None / empty allowed).

    :raises forms.ValidationError: not a JWK Set, or a key with private or symmetric material.
    """
    if not value:
        return None
    try:
        jwks_cache.checked_key_set(value)
    except jwks_cache.KeysUnavailable as exc:
        raise forms.ValidationError(str(exc)) from None
    return value


def clean_jwks_uri(value: str) -> str:
    """A ``jwks_uri`` as the admin may store it: blank, or an https URL.

    :raises forms.ValidationError: another scheme.
    """
    if value and not value.startswith("https://"):
        raise forms.ValidationError(_("The JWKS URL must be an https URL."))
    return value


class EnterpriseIdentityProviderForm(forms.ModelForm):
    class Meta:
        model = EnterpriseIdentityProvider
        fields = "__all__"

    def clean_jwks(self) -> Any:
        return clean_key_set(self.cleaned_data.get("jwks"))

    def clean_jwks_uri(self) -> str:
        return clean_jwks_uri(self.cleaned_data.get("jwks_uri") or "")

    def clean_algorithms(self) -> str:
        algorithms = (self.cleaned_data.get("algorithms") or "").split()
        refused = [alg for alg in algorithms if alg not in accepted_algorithms()]
        if not algorithms or refused:
            raise forms.ValidationError(
                _("Allowed here: %(accepted)s.") % {"accepted": " ".join(sorted(accepted_algorithms()))}
            )
        return " ".join(algorithms)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("jwks") and not data.get("jwks_uri"):
            raise forms.ValidationError(_("Give the IdP's JWKS URL or its keys inline."))
        return data


class UserAutocompleteMixin:
    """``user`` as an autocomplete box (searched with the user admin's ``search_fields``), or the raw id
    box of the class's ``raw_id_fields`` when the site's user admin is missing or cannot search: a
    static ``autocomplete_fields`` would fail such a site's system checks (admin.E039, admin.E040)."""

    def get_autocomplete_fields(self, request):
        fields = tuple(super().get_autocomplete_fields(request))  # type: ignore[misc]
        user_admin = self.admin_site._registry.get(get_user_model())  # type: ignore[attr-defined]
        if user_admin is not None and user_admin.get_search_fields(request):
            return (*fields, "user")
        return fields


class EnterpriseIdentityInline(OrganizationScopedAdmin, UserAutocompleteMixin, admin.TabularInline):
    model = EnterpriseIdentity
    organization_field = "provider__organization"
    # An organization admin links their IdP's subjects to their organizations' members.
    organization_admin_permissions = frozenset({"view", "add", "change", "delete"})
    extra = 0
    fields = ("subject", "user", "created", "last_used_at")

    def organization_of(self, obj):
        # an inline's permissions are asked about its parent, the provider
        return obj.organization_id if isinstance(obj, EnterpriseIdentityProvider) else super().organization_of(obj)

    readonly_fields = ("created", "last_used_at")
    raw_id_fields = ("user",)  # unless UserAutocompleteMixin can offer an autocomplete box


@admin.register(EnterpriseIdentityProvider)
class EnterpriseIdentityProviderAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Enterprise IdPs; an organization admin manages their organizations' IdPs (an IdP of no
    organization, which vouches for any, is the site's: not shown to them). The clients they may
    allow are the ones approved for their organizations, the resources their organizations' own."""

    organization_admin_permissions = frozenset({"view", "add", "change", "delete"})
    #: What an organization admin's IdP may do with a subject no one linked: nothing. Matching an
    #: e-mail address or creating a user reaches users outside the organization: the site's call.
    ORGANIZATION_ADMIN_USER_POLICIES = (EnterpriseIdentityProvider.UserPolicy.LINKED_ONLY,)
    form = EnterpriseIdentityProviderForm
    list_display = ("name", "issuer", "organization", "user_policy", "enabled", "updated")
    list_filter = ("enabled", "user_policy", OrganizationFilter)
    list_select_related = ("organization",)
    search_fields = ("name", "issuer")
    filter_horizontal = ("allowed_clients", "allowed_resources")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = (
        (None, {"fields": ("name", "issuer", "organization", "enabled")}),
        (_("Keys"), {"fields": ("jwks_uri", "jwks", "algorithms")}),
        (_("Policy"), {"fields": ("allowed_clients", "allowed_resources", "allowed_scopes", "user_policy")}),
    )
    inlines = [EnterpriseIdentityInline]
    autocomplete_fields = ("organization",)

    def formfield_for_choice_field(self, db_field, request, **kwargs):
        if db_field.name == "user_policy" and self.organization_scope(request) is not None:
            allowed = self.ORGANIZATION_ADMIN_USER_POLICIES
            kwargs["choices"] = [(value, label) for value, label in db_field.choices if value in allowed]
        return super().formfield_for_choice_field(db_field, request, **kwargs)

    def organization_choices(self, db_field, request, scope):
        if db_field.name == "allowed_clients":
            approved = OrganizationClient.objects.filter(
                organization__in=scope, status=OrganizationClient.Status.APPROVED
            ).values("application")
            return db_field.related_model._default_manager.filter(pk__in=approved)
        return super().organization_choices(db_field, request, scope)

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        for uri in {obj.jwks_uri, form.initial.get("jwks_uri") or ""} - {""}:
            jwks_cache.forget(uri)


@admin.register(EnterpriseIdentity)
class EnterpriseIdentityAdmin(OrganizationScopedAdmin, UserAutocompleteMixin, admin.ModelAdmin):
    organization_field = "provider__organization"
    organization_admin_permissions = frozenset({"view", "delete"})
    list_display = ("subject", "provider", "user", "created", "last_used_at")
    list_filter = ("provider", OrganizationFilter)
    list_select_related = ("provider", "user")
    search_fields = ("subject", f"user__{get_user_model().USERNAME_FIELD}")
    raw_id_fields = ("user",)  # unless UserAutocompleteMixin can offer an autocomplete box
