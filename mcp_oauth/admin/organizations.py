"""Admin screens of organizations: the organization with its policy (grouped in fieldsets) and its
members inline, and the memberships list. Imported (registered) by :mod:`mcp_oauth.admin`.

An organization admin (:mod:`mcp_oauth.admin.organization_scope`) changes their organization's
*policy* only: its name, slug (the per-organization endpoint's URL), external id (the site's tenant
key) and whether it is active (the site's switch, e.g. billing) stay the site's; they may not
lengthen token lifetimes past the site's, nor allow scopes the site does not offer. They add and
remove the members of their own organizations, a user named by exact username or e-mail address
(they never browse the site's users), and never change or remove their own membership (an admin
cannot lock themselves out, nor leave an organization without the admin who removed them).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.admin.enterprise import UserAutocompleteMixin
from mcp_oauth.admin.large_lists import USER_SEARCH, CappedCountPaginator
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin, UserByNameField
from mcp_oauth.models import Organization, OrganizationMembership

__all__ = [
    "SITE_FIELDS",
    "OrganizationAdmin",
    "OrganizationForm",
    "OrganizationMembershipAdmin",
    "OrganizationMembershipInline",
]

#: The fields of an organization that stay the site's (read-only to its organization admins).
SITE_FIELDS = ("name", "slug", "external_id", "is_active")


class InheritedBooleanSelect(forms.NullBooleanSelect):
    """A nullable policy switch: unset inherits the site's policy."""

    def __init__(self, attrs: Any = None) -> None:
        super().__init__(attrs)
        self.choices = [("unknown", _("As the site allows")), ("true", _("Allowed")), ("false", _("Refused"))]


class NameListField(forms.CharField):
    """A JSON list of names typed as words (spaces, commas or new lines between them)."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return list(dict.fromkeys(text.replace(",", " ").split()))

    def has_changed(self, initial: Any, data: Any) -> bool:
        return list(initial or []) != self.to_python(data)


class OrganizationForm(forms.ModelForm):
    """The organization's policy, checked against what the site offers."""

    enabled_tools = NameListField(
        label=_("Enabled tools"),
        required=False,
        help_text=_("Names of the tools members may list and call, one per line; empty: every tool."),
    )

    class Meta:
        model = Organization
        fields = "__all__"
        widgets = {
            "allow_dynamic_registration": InheritedBooleanSelect,
            "allow_client_id_metadata_documents": InheritedBooleanSelect,
        }

    #: Set by the admin for an organization admin: lifetimes no longer than the site's.
    capped_by_site = False

    def clean_allowed_scopes(self) -> str:
        scopes = list(dict.fromkeys((self.cleaned_data.get("allowed_scopes") or "").split()))
        offered = set(get_scopes_backend().get_all_scopes())
        unknown = [scope for scope in scopes if scope not in offered]
        if unknown:
            raise forms.ValidationError(
                _("Not a scope this site offers: %(scopes)s. Offered: %(offered)s."),
                params={"scopes": " ".join(unknown), "offered": " ".join(sorted(offered))},
            )
        return " ".join(scopes)

    def _lifetime(self, field: str, site_seconds: int | None) -> int | None:
        value = self.cleaned_data.get(field)
        if value is not None and value < 1:
            raise forms.ValidationError(_("A lifetime is at least one second."))
        if self.capped_by_site and value is not None and site_seconds and value > site_seconds:
            raise forms.ValidationError(_("At most the site's %(seconds)d seconds."), params={"seconds": site_seconds})
        return value

    def clean_access_token_lifetime(self) -> int | None:
        return self._lifetime("access_token_lifetime", oauth2_settings.ACCESS_TOKEN_EXPIRE_SECONDS)

    def clean_refresh_token_lifetime(self) -> int | None:
        return self._lifetime("refresh_token_lifetime", oauth2_settings.REFRESH_TOKEN_EXPIRE_SECONDS)


class _MembershipUserField:
    """The membership's user: for an organization admin a text box naming a user exactly
    (:class:`UserByNameField`); for site staff an autocomplete box (or the raw id box)."""

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if db_field.name == "user" and self.organization_scope(request) is not None:  # type: ignore[attr-defined]
            return UserByNameField(
                label=_("user"),
                help_text=_("Their exact username or e-mail address."),
                required=True,
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def _own(self, request: Any, obj: Any) -> bool:
        return (
            obj is not None
            and getattr(obj, "user_id", None) == request.user.pk
            and self.organization_scope(request) is not None  # type: ignore[attr-defined]
        )

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        if isinstance(obj, OrganizationMembership) and self._own(request, obj):
            return False
        return super().has_change_permission(request, obj)  # type: ignore[misc]

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        if isinstance(obj, OrganizationMembership) and self._own(request, obj):
            return False
        return super().has_delete_permission(request, obj)  # type: ignore[misc]


class OwnMembershipFormSet(forms.BaseInlineFormSet):
    """The inline's rows: an organization admin's own row stays as it is (no change, no deletion)."""

    request_user_pk: Any = None

    def clean(self) -> None:
        super().clean()
        for form in self.forms:
            own = self.request_user_pk is not None and form.instance.pk is not None
            if own and form.initial.get("user") == self.request_user_pk:
                if self._should_delete_form(form) or form.has_changed():  # type: ignore[attr-defined]
                    raise forms.ValidationError(_("You cannot change or remove your own membership."))


class OrganizationMembershipInline(
    _MembershipUserField, OrganizationScopedAdmin, UserAutocompleteMixin, admin.TabularInline
):
    model = OrganizationMembership
    formset = OwnMembershipFormSet
    extra = 0
    fields = ("user", "role", "created_at")
    readonly_fields = ("created_at",)
    raw_id_fields = ("user",)  # unless UserAutocompleteMixin can offer an autocomplete box
    organization_admin_permissions = frozenset({"view", "add", "change", "delete"})

    def get_formset(self, request: Any, obj: Any = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        if self.organization_scope(request) is not None:
            formset = type(formset.__name__, (formset,), {"request_user_pk": request.user.pk})
        return formset

    def organization_of(self, obj: Any) -> int | None:
        # an inline's permissions are asked about its parent, the organization
        return obj.pk if isinstance(obj, Organization) else super().organization_of(obj)


@admin.register(Organization)
class OrganizationAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Organizations and their policy; their members inline."""

    form = OrganizationForm
    organization_field = "pk"
    organization_admin_permissions = frozenset({"view", "change"})
    list_display = ("name", "slug", "is_active", "client_approval_required", "created_at")
    list_filter = ("is_active", "client_approval_required")
    search_fields = ("name", "slug", "external_id")
    readonly_fields = ("created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "slug", "external_id", "is_active")}),
        (
            _("Clients"),
            {
                "fields": (
                    "client_approval_required",
                    "allow_dynamic_registration",
                    "allow_client_id_metadata_documents",
                )
            },
        ),
        (_("Tools and scopes"), {"fields": ("enabled_tools", "allowed_scopes")}),
        (_("Token lifetimes"), {"fields": ("access_token_lifetime", "refresh_token_lifetime")}),
        (_("History"), {"fields": ("created_at", "updated_at")}),
    )
    inlines = [OrganizationMembershipInline]

    def get_prepopulated_fields(self, request: Any, obj: Any = None) -> dict[str, Any]:
        return {} if self.organization_scope(request) is not None else {"slug": ("name",)}

    def get_fieldsets(self, request: Any, obj: Any = None) -> Any:
        """The add form has no history yet: without this, it showed "Created: <now>" before saving."""
        fieldsets = super().get_fieldsets(request, obj)
        return fieldsets if obj is not None else [item for item in fieldsets if item[0] != _("History")]

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*SITE_FIELDS, *fields) if self.organization_scope(request) is not None else fields

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        if self.organization_scope(request) is not None:
            form = type(form.__name__, (form,), {"capped_by_site": True})
        return form


@admin.register(OrganizationMembership)
class OrganizationMembershipAdmin(
    _MembershipUserField, OrganizationScopedAdmin, UserAutocompleteMixin, admin.ModelAdmin
):
    """Who belongs to which organization, and as what (member or admin)."""

    organization_admin_permissions = frozenset({"view", "add", "change", "delete"})
    list_display = ("user", "organization", "role", "created_at")
    list_filter = ("role", OrganizationFilter)
    search_fields = (USER_SEARCH, "organization__name", "organization__slug")
    list_select_related = ("user", "organization")
    ordering = ("-pk",)  # newest first, from the primary key's index (not a sort of every membership)
    show_full_result_count = False
    paginator = CappedCountPaginator
    fields = ("organization", "user", "role", "created_at")
    readonly_fields = ("created_at",)
    autocomplete_fields = ("organization",)
    raw_id_fields = ("user",)  # unless UserAutocompleteMixin can offer an autocomplete box

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "organization", "user") if obj is not None else fields

    def get_fields(self, request: Any, obj: Any = None) -> Any:
        """The add form has no "Joined" yet (it showed the time the form was opened)."""
        fields = super().get_fields(request, obj)
        return fields if obj is not None else [name for name in fields if name != "created_at"]

    def save_model(self, request: Any, obj: OrganizationMembership, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if obj.role == OrganizationMembership.Role.ADMIN and not obj.user.is_staff:
            self.message_user(
                request,
                _(
                    "%(user)s is an admin of %(organization)s, but not staff: they sign in to this admin once the site marks them staff."
                )
                % {"user": obj.user.get_username(), "organization": obj.organization},
                messages.WARNING,
            )
