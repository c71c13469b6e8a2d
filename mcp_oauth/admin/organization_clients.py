"""Admin screens of organizations' clients: each organization's decision on a client (approve or
deny, as actions or on the form; each decision stamped with who and when, and written to the audit
log), and the organizations tokens act for (read-only). Imported (registered) by :mod:`mcp_oauth.admin`.

An organization admin (:mod:`mcp_oauth.admin.organization_scope`) decides for their own
organizations; they may add a decision on a client they name by its exact client ID (they never
browse the site's clients).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_oauth.admin.large_lists import CappedCountPaginator
from mcp_oauth.admin.organization_scope import ClientByIdField, OrganizationFilter, OrganizationScopedAdmin
from mcp_oauth.audit import record
from mcp_oauth.models import AuditEvent, OrganizationClient, TokenOrganization

__all__ = ["OrganizationClientAdmin", "TokenOrganizationAdmin", "decide"]

_DECISION_KINDS = {
    OrganizationClient.Status.APPROVED: AuditEvent.Kind.ORGANIZATION_CLIENT_APPROVED,
    OrganizationClient.Status.DENIED: AuditEvent.Kind.ORGANIZATION_CLIENT_DENIED,
}


def decide(row: OrganizationClient, status: str, request: Any) -> bool:
    """Record ``request.user``'s decision (``approved`` or ``denied``) on ``row``: status,
    ``decided_by``, ``decided_at`` saved (``post_save`` sent) and an ``organization.client_approved``
    or ``organization.client_denied`` audit event written for the row's organization.

    :returns: whether the status changed (a decision already taken is left as it is).
    :raises KeyError: ``status`` is not a decision.
    """
    kind = _DECISION_KINDS[status]  # type: ignore[index]
    if row.status == status and row.decided_at is not None:
        return False
    previous = row.status
    row.status = status
    row.decided_by = request.user
    row.decided_at = timezone.now()
    with transaction.atomic():
        row.save(update_fields=["status", "decided_by", "decided_at"])
        record(
            kind,
            request=request,
            user=request.user,
            client_id=row.application.client_id,
            detail={"via": "admin", "organization": row.organization.slug, "previous": previous},
            organization=row.organization_id,
        )
    return True


@admin.register(OrganizationClient)
class OrganizationClientAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Each organization's decision on a client; the actions approve or deny the selection."""

    organization_admin_permissions = frozenset({"view", "add", "change"})
    list_display = (
        "application",
        "client_id",
        "organization",
        "status",
        "requested_by",
        "requested_at",
        "decided_by",
        "decided_at",
    )
    list_filter = ("status", OrganizationFilter)
    # Exact terms, answered from unique indexes: a word search would read 100,000 decisions
    # (10,000 organizations with 10 clients each).
    search_fields = ("=application__client_id", "=organization__slug")
    search_help_text = _("A client's exact client ID, or an organization's exact slug.")
    ordering = ("-pk",)  # newest requests first, from the primary key's index
    list_select_related = ("application", "organization", "requested_by", "decided_by")
    fields = ("organization", "application", "status", "requested_by", "requested_at", "decided_by", "decided_at")
    readonly_fields = ("requested_by", "requested_at", "decided_by", "decided_at")
    autocomplete_fields = ("organization", "application")
    actions = ("approve", "deny")
    show_full_result_count = False
    paginator = CappedCountPaginator

    @admin.display(description=_("client ID"), ordering="application__client_id")
    def client_id(self, obj: OrganizationClient) -> str:
        return obj.application.client_id

    def get_search_results(self, request: Any, queryset: Any, search_term: str) -> tuple[Any, bool]:
        """An exact client ID, else an exact slug: each one indexed lookup (an ``OR`` across the two
        joined tables would read every decision)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        by_client = queryset.filter(application__client_id=term)
        if by_client.exists():
            return by_client, False
        return queryset.filter(organization__slug=term), False

    def get_readonly_fields(self, request: Any, obj: Any = None) -> Any:
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "organization", "application") if obj is not None else fields

    def formfield_for_foreignkey(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if db_field.name == "application" and self.organization_scope(request) is not None:
            return ClientByIdField(label=_("client ID"), help_text=_("The client's exact client ID."), required=True)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request: Any, obj: OrganizationClient, form: Any, change: bool) -> None:
        status = obj.status
        if change:
            obj.status = form.initial.get("status", obj.status)
        elif obj.requested_by_id is None:
            obj.requested_by = request.user
        super().save_model(request, obj, form, change)
        if status in _DECISION_KINDS:
            decide(obj, status, request)
        elif change and status != obj.status:  # back to pending
            obj.status, obj.decided_by, obj.decided_at = status, None, None
            obj.save(update_fields=["status", "decided_by", "decided_at"])

    def _decide_all(self, request: Any, queryset: Any, status: str) -> int:
        return sum(decide(row, status, request) for row in queryset.select_related("application", "organization"))

    @admin.action(description=_("Approve the selected clients"), permissions=["change"])
    def approve(self, request: Any, queryset: Any) -> None:
        count = self._decide_all(request, queryset, OrganizationClient.Status.APPROVED)
        self.message_user(
            request, ngettext("Approved %d client.", "Approved %d clients.", count) % count, messages.SUCCESS
        )

    @admin.action(description=_("Deny the selected clients"), permissions=["change"])
    def deny(self, request: Any, queryset: Any) -> None:
        count = self._decide_all(request, queryset, OrganizationClient.Status.DENIED)
        self.message_user(request, ngettext("Denied %d client.", "Denied %d clients.", count) % count, messages.SUCCESS)


@admin.register(TokenOrganization)
class TokenOrganizationAdmin(OrganizationScopedAdmin, admin.ModelAdmin):
    """Which organization a token chosen on a shared endpoint acts for: read-only (written by the
    token endpoint; the token itself is only named by its checksum)."""

    list_display = ("token_kind", "organization", "created_at", "expires")
    list_filter = ("token_kind", OrganizationFilter)
    search_fields = ("=token_checksum",)
    list_select_related = ("organization",)
    readonly_fields = ("token_checksum", "token_kind", "organization", "created_at", "expires")
    show_full_result_count = False
    paginator = CappedCountPaginator

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
