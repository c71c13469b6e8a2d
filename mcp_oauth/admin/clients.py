"""Admin screens of clients and trust: DOT's Application with the client profile inline, its
trust verdict, last use and actions; trust rules.

No secret is ever displayed: an existing application's ``client_secret`` is left out of its change
form (DOT's add form still shows a newly generated secret once, the only moment it can be copied).
Imported (registered) by :mod:`mcp_oauth.admin`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext
from oauth2_provider.models import (
    get_application_model,
)

from mcp_oauth.admin import enterprise as enterprise_admin
from mcp_oauth.admin import large_lists
from mcp_oauth.admin.large_lists import USER_SEARCH
from mcp_oauth.admin.organization_scope import OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.audit import record
from mcp_oauth.authorization_server.client_registry import (
    trust,  # enterprise_admin also registers the enterprise IdP screens
)
from mcp_oauth.authorization_server.client_registry.clients import bump_clients_generation
from mcp_oauth.authorization_server.tokens.lifetimes import site_refresh_token_idle_seconds
from mcp_oauth.models import (
    AuditEvent,
    ClientProfile,
    EnterpriseIdentityProvider,
    TrustRule,
    revoke_client_tokens,
)
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.loopback import is_loopback_host
from mcp_oauth.shared.redirect_uris import redirect_scheme_allowed

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise


# --- clients -----------------------------------------------------------------------------


def _verdict_label(verdict: trust.Verdict) -> StrOrPromise:
    return {
        trust.TRUSTED: _("trusted"),
        trust.UNKNOWN: _("unknown"),
        trust.REVIEW: _("held for review"),
        trust.DENIED: _("denied"),
    }[verdict.decision]


class ClientProfileForm(forms.ModelForm):
    """The profile's keys for ``private_key_jwt`` (RFC 7523 §2.2): a public JWK Set and / or an https URL."""

    class Meta:
        model = ClientProfile
        fields = "__all__"

    def clean_jwks(self):
        return enterprise_admin.clean_key_set(self.cleaned_data.get("jwks"))

    def clean_jwks_uri(self):
        return enterprise_admin.clean_jwks_uri(self.cleaned_data.get("jwks_uri") or "")

    # Session lengths (docs/how-to/session-lengths.md): at least a second; the idle window no longer
    # than the site's (DOT's cleartokens deletes refresh tokens past the site's).
    def _lifetime(self, field: str) -> int | None:
        value = self.cleaned_data.get(field)
        if value is not None and value < 1:
            raise forms.ValidationError(_("A lifetime is at least one second."))
        return value

    def clean_access_token_lifetime(self) -> int | None:
        return self._lifetime("access_token_lifetime")

    def clean_session_max_lifetime(self) -> int | None:
        return self._lifetime("session_max_lifetime")

    def clean_refresh_token_idle_lifetime(self) -> int | None:
        value = self._lifetime("refresh_token_idle_lifetime")
        site = site_refresh_token_idle_seconds()
        if value is not None and site is not None and value > site:
            raise forms.ValidationError(
                _("At most the site's refresh token lifetime (REFRESH_TOKEN_EXPIRE_SECONDS = %(site)s).")
                % {"site": site}
            )
        return value


class ClientProfileInline(admin.StackedInline):
    model = ClientProfile
    form = ClientProfileForm
    can_delete = False
    extra = 0
    fields = (
        "registration_source",
        "trust_verdict",
        "last_used_at",
        "client_uri",
        "logo_uri",
        "jwks_uri",
        "jwks",
        "dpop_bound_access_tokens",
        "access_token_lifetime",
        "refresh_token_idle_lifetime",
        "session_max_lifetime",
        "resource_server_for",
        "metadata",
    )
    readonly_fields = ("registration_source", "trust_verdict", "metadata", "last_used_at")
    filter_horizontal = ("resource_server_for",)
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.display(description=_("registration source"))
    def registration_source(self, obj):
        return obj.application.get_registration_source_display() if obj and obj.application_id else "-"

    @admin.display(description=_("trust verdict"))
    def trust_verdict(self, obj):
        if not obj or not obj.application_id:
            return "-"
        verdict = trust.evaluate_application(obj.application)
        return f"{_verdict_label(verdict)} ({verdict.reason})"


#: The trust-verdict filter judges at most this many clients, the most recently registered.
TRUST_FILTER_WINDOW = 5_000


class TrustVerdictFilter(admin.SimpleListFilter):
    """Filter clients by their current trust verdict (evaluated in Python against one snapshot of the
    rules), among the :data:`TRUST_FILTER_WINDOW` most recently registered clients."""

    title = _("trust verdict")
    parameter_name = "trust"

    def lookups(self, request, model_admin):
        return [
            (trust.TRUSTED, _("trusted")),
            (trust.UNKNOWN, _("unknown")),
            (trust.REVIEW, _("held for review")),
            (trust.DENIED, _("denied")),
        ]

    def queryset(self, request, queryset):
        wanted = self.value()
        if wanted not in (trust.TRUSTED, trust.UNKNOWN, trust.REVIEW, trust.DENIED):
            return queryset
        rules = trust.load_rules()
        # Bounded: the latest TRUST_FILTER_WINDOW clients are judged, never the whole table.
        rows = queryset.order_by("-pk").only("pk", "client_id", "redirect_uris", "registration_source")
        rows = rows[:TRUST_FILTER_WINDOW]
        keep = [app.pk for app in rows if trust.evaluate_application(app, rules=rules).decision == wanted]
        return queryset.filter(pk__in=keep)


class LastUsedFilter(admin.SimpleListFilter):
    title = _("last used")
    parameter_name = "used"

    def lookups(self, request, model_admin):
        return [
            ("never", _("never")),
            ("7", _("in the last 7 days")),
            ("30", _("in the last 30 days")),
            ("old", _("more than 30 days ago")),
        ]

    def queryset(self, request, queryset):
        now = timezone.now()
        value = self.value()
        if value == "never":
            return queryset.filter(
                models.Q(mcp_profile__isnull=True) | models.Q(mcp_profile__last_used_at__isnull=True)
            )
        if value in ("7", "30"):
            return queryset.filter(mcp_profile__last_used_at__gte=now - timedelta(days=int(value)))
        if value == "old":
            return queryset.filter(mcp_profile__last_used_at__lt=now - timedelta(days=30))
        return queryset


class GrantTypeFilter(admin.SimpleListFilter):
    """Filter clients by the grants this server's token endpoint serves them (:mod:`.authorization_server.server`).

    Authorization code (with its refresh tokens) and client credentials, the two stored
    ``authorization_grant_type`` values it accepts; the JWT bearer grant (an ID-JAG), open to the
    allowed clients of an enabled enterprise identity provider while
    ``MCP_OAUTH["ENTERPRISE_MANAGED_AUTHORIZATION"]`` is on; and, when such rows exist, "Not
    supported by this server": the other stored types (implicit, password, device code, OpenID
    hybrid), which can obtain no token here.
    """

    title = _("grant type")
    parameter_name = "grant_type"
    JWT_BEARER = "jwt-bearer"
    UNSUPPORTED = "unsupported"

    @staticmethod
    def supported() -> tuple[str, ...]:
        return (Application.GRANT_AUTHORIZATION_CODE, Application.GRANT_CLIENT_CREDENTIALS)

    def lookups(self, request, model_admin):
        labels = dict(Application._meta.get_field("authorization_grant_type").flatchoices)
        choices = [(value, labels.get(value, value)) for value in self.supported()]
        if mcp_oauth_settings.ENTERPRISE_MANAGED_AUTHORIZATION:
            choices.append((self.JWT_BEARER, _("JWT bearer (enterprise identity assertion)")))
        # The stored values that are not supported, looked up by the grant-type index (an exclude()
        # would read every row of a large table).
        unsupported = [value for value in labels if value and value not in self.supported()]
        if model_admin.get_queryset(request).filter(authorization_grant_type__in=unsupported).exists():
            choices.append((self.UNSUPPORTED, _("Not supported by this server")))
        return choices

    def queryset(self, request, queryset):
        value = self.value()
        if value in self.supported():
            return queryset.filter(authorization_grant_type=value)
        if value == self.JWT_BEARER and mcp_oauth_settings.ENTERPRISE_MANAGED_AUTHORIZATION:
            allowed = EnterpriseIdentityProvider.objects.filter(enabled=True, allowed_clients__isnull=False)
            return queryset.filter(pk__in=allowed.values("allowed_clients"))
        if value == self.UNSUPPORTED:
            return queryset.exclude(authorization_grant_type__in=self.supported())
        return queryset


def block_rules_for(application) -> list[tuple[str, str]]:
    """The ``(target, pattern)`` deny rules that block ``application`` by host.

    A CIMD client: its client_id host. Another client: each redirect host that is not
    loopback; a client whose redirect URIs are all loopback (any native app could use
    them) is blocked by its client_id instead.
    """
    if application.registration_source == trust.CIMD and trust.is_cimd_client_id(application.client_id):
        host = trust.host_of(application.client_id)
        if host:
            return [(TrustRule.Target.CLIENT_ID_HOST, host)]
    hosts = [trust.host_of(uri) for uri in (application.redirect_uris or "").split()]
    hosts = list(dict.fromkeys(h for h in hosts if h and not is_loopback_host(h)))
    if hosts:
        return [(TrustRule.Target.REDIRECT_HOST, host) for host in hosts]
    return [(TrustRule.Target.CLIENT, application.client_id)]


Application = get_application_model()
if admin.site.is_registered(Application):
    _base = type(admin.site._registry[Application])
    admin.site.unregister(Application)
else:  # pragma: no cover - DOT always registers it
    _base = admin.ModelAdmin


class ApplicationForm(getattr(_base, "form", None) or forms.ModelForm):  # type: ignore[misc]
    """DOT's application form, plus the redirect-scheme rule: ``http`` only on a loopback host.

    The grant types offered are the ones the token endpoint serves (:meth:`GrantTypeFilter.supported`);
    an existing client of another type keeps its own as a choice, labelled as not supported.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields.get("authorization_grant_type")
        if field is None:
            return
        supported = GrantTypeFilter.supported()
        current = self.instance.authorization_grant_type if self.instance.pk else None
        choices = []
        for value, label in field.choices:
            if value in supported or value == "":
                choices.append((value, label))
            elif value == current:
                choices.append((value, _("%(grant)s (not supported by this server)") % {"grant": label}))
        field.choices = choices

    def clean_redirect_uris(self) -> str:
        value = self.cleaned_data.get("redirect_uris") or ""
        refused = [uri for uri in value.split() if not redirect_scheme_allowed(uri)]
        if refused:
            raise forms.ValidationError(
                _("Redirect URIs must use https, or http on a loopback host (RFC 8252 §7.3): %(uris)s"),
                params={"uris": " ".join(refused)},
            )
        return value


@admin.register(Application)
class ApplicationWithProfileAdmin(_base):  # type: ignore[misc,valid-type]  # DOT's admin class, found at run time
    """DOT's Application admin with the client profile, trust verdict, last use and our actions."""

    form = ApplicationForm
    #: DOT's Application.get_absolute_url() names DOT's own management views, which this app's
    #: URLs replace: "View on site" would be a NoReverseMatch.
    view_on_site = False

    inlines = [*getattr(_base, "inlines", []), ClientProfileInline]
    list_display = ("name", "client_id", "registration_source", "client_type", "trust_verdict", "last_used", "created")
    list_filter = (
        "registration_source",
        "client_type",
        GrantTypeFilter,
        TrustVerdictFilter,
        LastUsedFilter,
        ("created", admin.DateFieldListFilter),
    )
    search_fields = ("name", "client_id", "redirect_uris", USER_SEARCH)
    search_help_text = _(
        "An exact client ID, or words found in the name, client ID, redirect URIs or owner of the "
        "%(window)s most recently registered clients."
    ) % {"window": f"{large_lists.SEARCH_WINDOW:,}"}
    actions = ("revoke_all_tokens", "block_host", "trust_clients")
    list_select_related = ("mcp_profile", "user")
    # A million dynamic registrations (issue #28): no COUNT(*) over the table, a capped count.
    show_full_result_count = False
    paginator = large_lists.CappedCountPaginator

    def get_search_results(self, request, queryset, search_term):
        """:func:`~mcp_oauth.admin.large_lists.bounded_search`: an exact ``client_id`` anywhere, other
        words among the most recent clients (never a scan of the whole table)."""
        return large_lists.bounded_search(queryset, search_term, self.search_fields), False

    def get_exclude(self, request, obj=None):
        exclude = tuple(super().get_exclude(request, obj) or ())
        if obj is not None and "client_secret" not in exclude:
            exclude += ("client_secret",)  # never display a stored secret (or its hash)
        return exclude

    def changelist_view(self, request, extra_context=None):
        with trust.rules_snapshot():  # one rules query for the whole page
            response = super().changelist_view(request, extra_context)
            if isinstance(response, TemplateResponse):
                response.render()
        return response

    @admin.display(description=_("trust"))
    def trust_verdict(self, obj):
        return _verdict_label(trust.evaluate_application(obj))

    @admin.display(description=_("last used"))  # not sortable: a sort across the join reads every row
    def last_used(self, obj):
        profile = getattr(obj, "mcp_profile", None)
        return profile.last_used_at if profile is not None and profile.last_used_at else "-"

    @admin.action(description=_("Revoke all tokens of the selected clients"), permissions=["change"])
    def revoke_all_tokens(self, request, queryset):
        total = 0
        for application in queryset:
            count = revoke_client_tokens(application)
            total += count
            record(
                AuditEvent.Kind.TOKEN_REVOKED,
                request=request,
                client_id=application.client_id,
                detail={"via": "admin", "action": "revoke all tokens", "count": count},
            )
        self.message_user(
            request,
            ngettext(
                "Revoked %(tokens)d token of %(clients)d client(s).",
                "Revoked %(tokens)d tokens of %(clients)d client(s).",
                total,
            )
            % {"tokens": total, "clients": len(queryset)},
            messages.SUCCESS,
        )

    @admin.action(
        description=_("Block the host of the selected clients (deny rule, tokens revoked)"), permissions=["change"]
    )
    def block_host(self, request, queryset):
        blocked = []
        for application in queryset:
            for target, pattern in block_rules_for(application):
                rule, created = TrustRule.objects.update_or_create(
                    target=target,
                    pattern=pattern,
                    registration_source="",
                    defaults={
                        "action": TrustRule.Action.DENY,
                        "enabled": True,
                        "note": f"Blocked from the admin (client {application.client_id})"[:500],
                    },
                )
                if created:
                    rule.created_by = request.user
                    rule.save(update_fields=["created_by"])
                    self.log_addition(request, rule, [{"added": {}}])
                else:
                    self.log_change(request, rule, [{"changed": {"fields": ["action", "enabled"]}}])
                blocked.append(f"{rule.get_target_display()} {rule.pattern}")
            count = revoke_client_tokens(application)
            record(
                AuditEvent.Kind.TOKEN_REVOKED,
                request=request,
                client_id=application.client_id,
                detail={"via": "admin", "action": "block host", "count": count},
            )
        self.message_user(
            request,
            _(
                "Denied: %(rules)s. Their clients can no longer be authorized or obtain tokens; "
                "the selected clients' tokens were revoked."
            )
            % {"rules": ", ".join(dict.fromkeys(blocked)) or "-"},
            messages.WARNING,
        )

    @admin.action(
        description=_("Trust the selected clients (allow rule; approves clients held for review)"),
        permissions=["change"],
    )
    def trust_clients(self, request, queryset):
        still_denied = []
        for application in queryset:
            rule, created = TrustRule.objects.update_or_create(
                target=TrustRule.Target.CLIENT,
                pattern=application.client_id,
                registration_source="",
                defaults={"action": TrustRule.Action.ALLOW, "enabled": True, "note": "Trusted from the admin"},
            )
            if created:
                rule.created_by = request.user
                rule.save(update_fields=["created_by"])
                self.log_addition(request, rule, [{"added": {}}])
            if trust.evaluate_application(application).decision == trust.DENIED:
                still_denied.append(str(application))
        self.message_user(
            request,
            ngettext("Trusted %d client.", "Trusted %d clients.", len(queryset)) % len(queryset),
            messages.SUCCESS,
        )
        if still_denied:
            self.message_user(
                request,
                _("Still denied by a deny rule (a deny always wins): %s") % ", ".join(still_denied),
                messages.WARNING,
            )


# --- trust rules -------------------------------------------------------------------------


@admin.register(TrustRule)
class TrustRuleAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Trust rules; an organization admin manages their organizations' rules (site-wide rules,
    whose organization is empty, are the site's: not shown to them)."""

    organization_admin_permissions = frozenset({"view", "add", "change", "delete"})
    list_display = (
        "pattern",
        "target",
        "action",
        "registration_source",
        "organization",
        "enabled",
        "note",
        "created_at",
        "created_by",
    )
    list_filter = ("action", "target", "registration_source", "enabled", OrganizationFilter)
    search_fields = ("pattern", "note")
    list_editable = ("enabled",)
    readonly_fields = ("created_at", "updated_at", "created_by")
    fields = (
        "organization",
        "target",
        "pattern",
        "registration_source",
        "action",
        "enabled",
        "note",
        "created_at",
        "updated_at",
        "created_by",
    )
    actions = ("enable_rules", "disable_rules")
    autocomplete_fields = ("organization",)
    list_select_related = ("organization", "created_by")
    change_list_template = "admin/mcp_oauth/trustrule/change_list.html"

    def save_model(self, request, obj, form, change):
        if not change and obj.created_by_id is None:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def changelist_view(self, request, extra_context=None):
        mode = trust.current_mode()
        extra_context = {
            **(extra_context or {}),
            "trust_mode": mode,
            "trust_mode_help": {
                trust.MODE_OPEN: _(
                    "any https client may be authorized; clients no rule speaks about are shown as unknown"
                ),
                trust.MODE_ALLOWLIST: _("only clients an allow rule matches (and clients registered in the admin)"),
                trust.MODE_REVIEW: _(
                    "clients no rule speaks about may register but are held until an administrator trusts them"
                ),
            }[mode],
        }
        return super().changelist_view(request, extra_context)

    @admin.action(description=_("Enable the selected rules"), permissions=["change"])
    def enable_rules(self, request, queryset):
        count = queryset.update(enabled=True, updated_at=timezone.now())
        bump_clients_generation()  # no signal for a bulk update
        self.message_user(request, ngettext("Enabled %d rule.", "Enabled %d rules.", count) % count, messages.SUCCESS)

    @admin.action(description=_("Disable the selected rules"), permissions=["change"])
    def disable_rules(self, request, queryset):
        count = queryset.update(enabled=False, updated_at=timezone.now())
        bump_clients_generation()  # no signal for a bulk update
        self.message_user(request, ngettext("Disabled %d rule.", "Disabled %d rules.", count) % count, messages.SUCCESS)
