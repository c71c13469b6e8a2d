"""Rows the admin never deletes one by one, but which go with their owner's deletion.

The consent, access-token and refresh-token screens refuse a direct delete (revoke instead, so
that a token family dies whole). Django's admin asks the same ``has_delete_permission`` of every
row a deletion cascades to, and refuses the whole deletion (403, superusers included) when one
says no: a user who ever consented could not be deleted. :class:`CascadeDeletable` answers the
two questions apart:

* on the model's own screens (its change list, change and delete views): the screen's own rule
  (``False`` here: revoke instead);
* anywhere else (the deletion of a user, of a client, the ``delete_selected`` action of another
  model): the requester's Django permission ``<app>.delete_<model>``, as for any other row, so
  a superuser may delete a user with their consents and tokens, and a staff user without those
  permissions is still refused (Django's ``perms_needed``).

The user's data is removed whole by :func:`mcp_oauth.authorization_server.user_data.erasure.erase_user_data`,
which the user model's ``pre_delete`` receiver runs.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin


def _own_screen(model_admin: admin.ModelAdmin, request: Any) -> bool:
    match = getattr(request, "resolver_match", None)
    if match is None or not match.url_name:
        return True
    opts = model_admin.model._meta
    return str(match.url_name).startswith(f"{opts.app_label}_{opts.model_name}_")


class CascadeDeletable:
    """Mixin for a ``ModelAdmin`` whose rows are deleted only with the row they belong to."""

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        if _own_screen(self, request):  # type: ignore[arg-type]
            return self.own_delete_permission(request, obj)
        opts = self.model._meta  # type: ignore[attr-defined]
        return bool(request.user.has_perm(f"{opts.app_label}.delete_{opts.model_name}"))

    def own_delete_permission(self, request: Any, obj: Any = None) -> bool:
        """Whether the model's own screens may delete (default: no)."""
        return False


def reregister_cascade_deletable(model: Any) -> None:
    """Replace the registered admin of ``model`` by a subclass with :class:`CascadeDeletable` (idempotent)."""
    if not admin.site.is_registered(model):
        return
    current = type(admin.site._registry[model])
    if issubclass(current, CascadeDeletable):
        return
    admin.site.unregister(model)
    admin.site.register(model, type(current.__name__, (CascadeDeletable, current), {"__module__": __name__}))
