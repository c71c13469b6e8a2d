"""Organization admins in the Django admin: every screen an organization admin uses shows, lets them
choose and lets them change the rows of the organizations they administer, and nothing else.

Who is an organization admin: a user whose role is ``admin`` in an active organization, as the
adapter says (:meth:`mcp_oauth.adapter.DefaultMCPAdapter.organization_memberships`). They enter the
admin as anyone does, as *staff* (``is_staff``; Django's :meth:`AdminSite.has_permission
<django.contrib.admin.AdminSite.has_permission>` is left alone, so a site's own admin site keeps its
rules): the site marks its organization admins staff and gives them no Django permission on these
models. Who sees everything: superusers, and staff holding one of Django's permissions on the
model (``view``, ``add``, ``change`` or ``delete``): the site's own staff keep the global view.

:class:`OrganizationScopedAdmin`, mixed into every screen that has an organization, answers for an
organization admin:

* the rows (:meth:`~OrganizationScopedAdmin.get_queryset`, so the change list, search, the
  autocomplete endpoint, raw-id pop-ups, actions over a selection, date hierarchy and every object
  view) are those of the organizations they administer; rows of no organization (site-wide trust
  rules, the default resource) are not theirs;
* the permissions are the screen's :attr:`~OrganizationScopedAdmin.organization_admin_permissions`,
  and only on their rows;
* an object of another organization (or none) by URL is a 404, exactly as an object that does not
  exist (never a 403 or a redirect that would tell it exists);
* a foreign key's choices, its autocomplete box and the list filters of related fields are the
  related screen's rows for them; a raw-id box is a plain select; the organization of a new row is
  required and one of theirs, and a POST naming another organization is a form error (and would be
  refused again by :meth:`~OrganizationScopedAdmin.save_model`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.options import TO_FIELD_VAR, IncorrectLookupParameters
from django.contrib.admin.utils import NotRelationField, get_fields_from_path, unquote
from django.contrib.admin.widgets import AutocompleteSelect
from django.contrib.auth import get_permission_codename, get_user_model
from django.core.exceptions import FieldDoesNotExist, PermissionDenied, ValidationError
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import get_application_model

from mcp_oauth.models import Organization, OrganizationMembership
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "ACTIONS",
    "FILTER_CHOICES",
    "ClientByIdField",
    "OrganizationFilter",
    "OrganizationScopedAdmin",
    "UserByNameField",
    "administered_organizations",
]

ACTIONS = ("view", "add", "change", "delete")
#: The organization filter lists at most this many organizations to site staff (an organization
#: admin sees their own); a site with more filters by one with ``?organization=<id>``.
FILTER_CHOICES = 50
_CACHE_ATTRIBUTE = "_mcp_administered_organizations"


def administered_organizations(request: Any) -> frozenset[int]:
    """The primary keys of the active organizations ``request.user`` is an admin of (per the
    adapter's ``organization_memberships``), read once per request."""
    cached = getattr(request, _CACHE_ATTRIBUTE, None)
    if cached is None:
        user = getattr(request, "user", None)
        if user is None or not (user.is_authenticated and user.is_active and user.is_staff):
            cached = frozenset()
        else:
            memberships = mcp_oauth_settings.adapter.organization_memberships(user)
            cached = frozenset(pk for pk, role in memberships.items() if role == OrganizationMembership.Role.ADMIN)
        setattr(request, _CACHE_ATTRIBUTE, cached)
    return cached


class OrganizationFilter(admin.SimpleListFilter):
    """Rows of one organization (``?organization=<pk>``): an organization admin's own organizations;
    for site staff the first :data:`FILTER_CHOICES` by name, plus the one chosen."""

    title = _("organization")
    parameter_name = "organization"

    def lookups(self, request, model_admin):
        scope = model_admin.organization_scope(request)
        if scope is not None:
            rows = Organization.objects.filter(pk__in=scope)
        else:
            rows = Organization.objects.all()[:FILTER_CHOICES]
        choices = [(str(pk), name or slug) for pk, name, slug in rows.values_list("pk", "name", "slug")]
        chosen = self._chosen()
        if scope is None and chosen is not None and str(chosen) not in dict(choices):
            choices += [
                (str(pk), name or slug)
                for pk, name, slug in Organization.objects.filter(pk=chosen).values_list("pk", "name", "slug")
            ]
        return choices

    def _chosen(self) -> int | None:
        value = self.value()
        text = str(value or "")
        return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        chosen = self._chosen()
        if chosen is None:
            return queryset.none()
        return queryset.filter(**{f"{self.organization_field}__pk": chosen})

    def __init__(self, request, params, model, model_admin):
        self.organization_field = model_admin.organization_field
        super().__init__(request, params, model, model_admin)


class _ExactLookupField(forms.CharField):
    """A text box naming one row exactly (never a list to pick from): an organization admin may
    add a user or a client they know without seeing the site's users or clients."""

    not_found = _("No such row.")

    def rows(self) -> QuerySet:
        raise NotImplementedError

    def match(self, value: str) -> Q:
        raise NotImplementedError

    def label_of(self, obj: Any) -> str:
        return str(obj)

    def prepare_value(self, value: Any) -> Any:
        model = self.rows().model
        if isinstance(value, int):
            value = model._default_manager.filter(pk=value).first()
        if isinstance(value, model):
            return self.label_of(value)
        return "" if value is None else value

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if not text:
            return None
        found = list(self.rows().filter(self.match(text))[:2])
        if len(found) != 1:
            raise forms.ValidationError(self.not_found, code="invalid_choice")
        return found[0]

    def has_changed(self, initial: Any, data: Any) -> bool:
        return str(self.prepare_value(initial) or "") != str(data or "").strip()


class UserByNameField(_ExactLookupField):
    """A user by their exact username (``USERNAME_FIELD``) or e-mail address (active users only)."""

    not_found = _("No user has this exact username or e-mail address.")

    def rows(self) -> QuerySet:
        return get_user_model()._default_manager.filter(is_active=True)

    def match(self, value: str) -> Q:
        user_model = get_user_model()
        condition = Q(**{user_model.USERNAME_FIELD: value})
        email_field = user_model.get_email_field_name()
        if "@" in value and email_field:
            condition |= Q(**{f"{email_field}__iexact": value})
        return condition

    def label_of(self, obj: Any) -> str:
        return obj.get_username()


class ClientByIdField(_ExactLookupField):
    """A client (DOT application) by its exact ``client_id``."""

    not_found = _("No client has this exact client ID.")

    def rows(self) -> QuerySet:
        return get_application_model()._default_manager.all()

    def match(self, value: str) -> Q:
        return Q(client_id=value)

    def label_of(self, obj: Any) -> str:
        return obj.client_id


class ForgivingAutocompleteSelect(AutocompleteSelect):
    """Django's autocomplete box, which renders a submitted value that is no key (``"x"``) as no
    choice instead of failing the page (Django looks the value up as it came)."""

    def optgroups(self, name: str, value: Any, attrs: Any = None) -> Any:
        target = self.field.target_field
        keys = []
        for item in value:
            try:
                target.to_python(item)
            except (ValidationError, TypeError, ValueError):
                continue
            keys.append(item)
        return super().optgroups(name, keys, attrs)


class ExistingRowsOnlyForm(forms.ModelForm):
    """The list-editable rows' form: a row the list does not hold (a forged ``form-N-id``) is an error
    of its own, never validated as a new row (whose model checks would name fields the form lacks)."""

    def _post_clean(self) -> None:
        if self.instance.pk is None:
            self.add_error(None, _("This row is not in the list."))
            return
        super()._post_clean()  # type: ignore[misc]  # ModelForm's, not in the stubs


def _is_relation(model: Any, path: str) -> bool:
    try:
        return bool(get_fields_from_path(model, path)[-1].is_relation)
    except (FieldDoesNotExist, NotRelationField):  # not a field path (a callable filter, a typo)
        return False


class OrganizationScopedAdmin:
    """Mixin (first, before ``admin.ModelAdmin`` or an inline class) for a screen whose rows belong
    to an organization. See the module's documentation for what an organization admin gets."""

    #: The lookup from the model to its organization (``"pk"`` on :class:`Organization` itself).
    organization_field = "organization"
    #: What an organization admin may do on this screen, on their own organizations' rows.
    organization_admin_permissions: frozenset[str] = frozenset({"view"})

    # --- who -------------------------------------------------------------------------------

    def organization_scope(self, request: Any) -> frozenset[int] | None:
        """``None`` for the global view (a superuser, or staff with a Django permission on this
        model); else the organizations ``request.user`` administers (maybe none)."""
        user = request.user
        if user.is_superuser:
            return None
        opts = self.model._meta  # type: ignore[attr-defined]
        if any(user.has_perm(f"{opts.app_label}.{get_permission_codename(a, opts)}") for a in ACTIONS):
            return None
        return administered_organizations(request)

    def organization_of(self, obj: Any) -> int | None:
        """The primary key of ``obj``'s organization (``None``: a site-wide row)."""
        *path, last = self.organization_field.split("__")
        for name in path:
            obj = getattr(obj, name, None)
            if obj is None:
                return None
        return obj.pk if last == "pk" else getattr(obj, f"{last}_id", None)

    def _scoped_answer(self, request: Any, action: str, obj: Any = None) -> bool | None:
        scope = self.organization_scope(request)
        if scope is None:
            return None
        allowed = self.organization_admin_permissions
        if not scope or not (action in allowed or (action == "view" and "change" in allowed)):
            return False
        return obj is None or self.organization_of(obj) in scope

    # --- permissions -------------------------------------------------------------------------

    def has_module_permission(self, request: Any) -> bool:
        if self.organization_scope(request) is None:
            return super().has_module_permission(request)  # type: ignore[misc]
        return bool(administered_organizations(request)) and bool(self.organization_admin_permissions)

    def has_view_permission(self, request: Any, obj: Any = None) -> bool:
        answer = self._scoped_answer(request, "view", obj)
        return super().has_view_permission(request, obj) if answer is None else answer  # type: ignore[misc]

    def has_add_permission(self, request: Any, *args: Any) -> bool:
        answer = self._scoped_answer(request, "add")
        return super().has_add_permission(request, *args) if answer is None else answer  # type: ignore[misc]

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        answer = self._scoped_answer(request, "change", obj)
        return super().has_change_permission(request, obj) if answer is None else answer  # type: ignore[misc]

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        answer = self._scoped_answer(request, "delete", obj)
        return super().has_delete_permission(request, obj) if answer is None else answer  # type: ignore[misc]

    # --- rows --------------------------------------------------------------------------------

    def _scoped(self, request: Any, queryset: QuerySet) -> QuerySet:
        scope = self.organization_scope(request)
        if scope is None:
            return queryset
        return queryset.filter(**{f"{self.organization_field}__in": scope})

    def get_queryset(self, request: Any) -> QuerySet:
        return self._scoped(request, super().get_queryset(request))  # type: ignore[misc]

    def get_search_results(self, request: Any, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        if "\x00" in search_term:  # PostgreSQL text holds no NUL: no row can match it
            return queryset.none(), False
        queryset, may_have_duplicates = super().get_search_results(request, queryset, search_term)  # type: ignore[misc]
        return self._scoped(request, queryset), may_have_duplicates

    def get_changelist_instance(self, request: Any) -> Any:
        """Django's, with a NUL byte in the list's query refused as an invalid lookup (the list's
        ``?e=1`` redirect) instead of reaching PostgreSQL, whose text holds none."""
        if any("\x00" in key or "\x00" in value for key, values in request.GET.lists() for value in values):
            raise IncorrectLookupParameters("A NUL byte in the list's parameters.")
        return super().get_changelist_instance(request)  # type: ignore[misc]

    def get_object(self, request: Any, object_id: str, from_field: str | None = None) -> Any:
        if "\x00" in str(object_id):  # no row has it (PostgreSQL text holds no NUL)
            return None
        return super().get_object(request, object_id, from_field)  # type: ignore[misc]

    def get_list_filter(self, request: Any) -> Any:
        filters = super().get_list_filter(request)  # type: ignore[misc]
        if self.organization_scope(request) is None:
            return filters
        scoped = []
        for item in filters:
            name, kind = (item[0], item[1]) if isinstance(item, (tuple, list)) else (item, None)
            related = isinstance(name, str) and _is_relation(self.model, name)  # type: ignore[attr-defined]
            if related and kind in (None, admin.RelatedFieldListFilter):
                scoped.append((name, admin.RelatedOnlyFieldListFilter))  # the values of their own rows
            else:
                scoped.append(item)
        return scoped

    def _object_in_scope_or_404(self, request: Any, object_id: str | None) -> None:
        if object_id is None or self.organization_scope(request) is None:
            return
        to_field = request.POST.get(TO_FIELD_VAR, request.GET.get(TO_FIELD_VAR))
        if to_field and not self.to_field_allowed(request, to_field):  # type: ignore[attr-defined]
            to_field = None
        if self.get_object(request, unquote(object_id), to_field) is None:
            raise Http404(_("No such object."))

    def change_view(self, request: Any, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        self._object_in_scope_or_404(request, object_id)
        return super().change_view(request, object_id, form_url, extra_context)  # type: ignore[misc]

    def history_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        self._object_in_scope_or_404(request, object_id)
        return super().history_view(request, object_id, extra_context)  # type: ignore[misc]

    def delete_view(self, request: Any, object_id: str, extra_context: Any = None) -> Any:
        self._object_in_scope_or_404(request, object_id)
        return super().delete_view(request, object_id, extra_context)  # type: ignore[misc]

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        scope = self.organization_scope(request)
        if scope is not None and self.organization_of(obj) not in scope:
            raise PermissionDenied  # unreachable through the form, whose choices are theirs
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    # --- choices -----------------------------------------------------------------------------

    def _related_admin(self, model: Any) -> Any:
        return self.admin_site._registry.get(model)  # type: ignore[attr-defined]

    def organization_choices(self, db_field: Any, request: Any, scope: frozenset[int]) -> QuerySet:
        """The rows an organization admin may choose for ``db_field``: the related screen's rows
        when it is organization-scoped; the members of their organizations for a user; else none
        (a screen that offers more overrides this)."""
        model = db_field.related_model
        if model is Organization:
            return Organization.objects.filter(pk__in=scope)
        related = self._related_admin(model)
        if isinstance(related, OrganizationScopedAdmin):
            return related.get_queryset(request)
        if model is get_user_model():
            members = OrganizationMembership.objects.filter(organization__in=scope).values("user")
            return model._default_manager.filter(pk__in=members)
        return model._default_manager.none()

    def _scoped_autocomplete(self, db_field: Any) -> bool:
        return isinstance(self._related_admin(db_field.related_model), OrganizationScopedAdmin)

    def get_autocomplete_fields(self, request: Any) -> Any:
        fields = tuple(super().get_autocomplete_fields(request))  # type: ignore[misc]
        if self.organization_scope(request) is None:
            return fields
        opts = self.model._meta  # type: ignore[attr-defined]
        return tuple(name for name in fields if self._scoped_autocomplete(opts.get_field(name)))

    def get_changelist_form(self, request: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("form", ExistingRowsOnlyForm)
        return super().get_changelist_form(request, **kwargs)  # type: ignore[misc]

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if "widget" not in kwargs and db_field.name in self.get_autocomplete_fields(request):
            kwargs["widget"] = ForgivingAutocompleteSelect(db_field, self.admin_site, using=kwargs.get("using"))  # type: ignore[attr-defined]
        scope = self.organization_scope(request)
        if scope is not None:
            kwargs.setdefault("queryset", self.organization_choices(db_field, request, scope))
            if db_field.related_model is Organization:
                kwargs["required"] = True  # an organization admin never creates a site-wide row
            if db_field.name in self.raw_id_fields and "widget" not in kwargs:  # type: ignore[attr-defined]
                kwargs["widget"] = forms.Select  # a raw-id box would look up any row by its id
        return super().formfield_for_foreignkey(db_field, request, **kwargs)  # type: ignore[misc]

    def formfield_for_manytomany(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        scope = self.organization_scope(request)
        if scope is not None:
            kwargs.setdefault("queryset", self.organization_choices(db_field, request, scope))
            if db_field.name in self.raw_id_fields and "widget" not in kwargs:  # type: ignore[attr-defined]
                kwargs["widget"] = forms.SelectMultiple
        return super().formfield_for_manytomany(db_field, request, **kwargs)  # type: ignore[misc]
