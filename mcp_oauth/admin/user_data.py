"""Two actions on the site's user admin: export a user's data, erase a user's data.

The registered admin of the user model (``django.contrib.auth``'s ``UserAdmin`` or the site's
own) is replaced by a subclass that adds them, as :mod:`mcp_oauth.admin` does for DOT's
application admin; a site whose user admin registers after ``mcp_oauth`` (a later app in
``INSTALLED_APPS``) calls :func:`add_user_data_actions` itself.

* **Export the selected user's data (JSON)** — one user at a time; the streamed document of
  :mod:`mcp_oauth.authorization_server.user_data.export` (GDPR Art. 15/20). Needs the permission
  ``mcp_oauth.export_user_data``.
* **Erase the selected users' MCP data** — after a confirmation page, the removal of
  :func:`mcp_oauth.authorization_server.user_data.erasure.erase_user_data` (GDPR Art. 17), keeping the
  accounts. Needs ``mcp_oauth.erase_user_data``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from mcp_oauth.authorization_server.user_data.erasure import erase_user_data
from mcp_oauth.authorization_server.user_data.export import export_response


class UserDataActions:
    """Mixin for the user model's ``ModelAdmin``: the export and erase actions."""

    def has_export_permission(self, request: Any) -> bool:
        return bool(request.user.has_perm("mcp_oauth.export_user_data"))

    def has_erase_permission(self, request: Any) -> bool:
        return bool(request.user.has_perm("mcp_oauth.erase_user_data"))

    @admin.action(description=_("Export the selected user's MCP data (JSON)"), permissions=["export"])
    def export_user_data(self, request: Any, queryset: Any) -> Any:
        users = list(queryset[:2])
        if len(users) != 1:
            self.message_user(request, _("Select exactly one user to export."), messages.ERROR)  # type: ignore[attr-defined]
            return None
        return export_response(users[0])

    @admin.action(description=_("Erase the selected users' MCP data (keep the accounts)"), permissions=["erase"])
    def erase_user_data(self, request: Any, queryset: Any) -> Any:
        users = list(queryset)
        if request.POST.get("confirm") != "yes":
            opts = self.model._meta  # type: ignore[attr-defined]
            context = {
                **self.admin_site.each_context(request),  # type: ignore[attr-defined]
                "title": _("Erase MCP data"),
                "users": users,
                "opts": opts,
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
            }
            return TemplateResponse(request, "admin/mcp_oauth/erase_user_data.html", context)
        for user in users:
            erase_user_data(user, reason="erased", actor=request.user)
        self.message_user(  # type: ignore[attr-defined]
            request,
            ngettext("Erased the MCP data of %(n)d user.", "Erased the MCP data of %(n)d users.", len(users))
            % {"n": len(users)},
            messages.SUCCESS,
        )
        return None


def add_user_data_actions(site: admin.AdminSite = admin.site) -> bool:
    """Add the two actions to the registered admin of the user model (idempotent).
    :returns: whether the user model's admin is registered (and now has them)."""
    User = get_user_model()
    if not site.is_registered(User):
        return False
    current = type(site._registry[User])
    if issubclass(current, UserDataActions):
        return True
    actions = [*(current.actions or []), "export_user_data", "erase_user_data"]
    site.unregister(User)
    site.register(
        User, type(current.__name__, (UserDataActions, current), {"__module__": __name__, "actions": actions})
    )
    return True
