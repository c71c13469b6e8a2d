from django.apps import AppConfig, apps
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext_lazy as _


class MCPOAuthConfig(AppConfig):
    """Wires the app (:func:`mcp_oauth.wiring.wire`): DOT secure defaults, system checks, receivers,
    the default resource, tool, resource and prompt autodiscovery."""

    name = "mcp_oauth"
    verbose_name = _("MCP authorization")
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self) -> None:
        """Say exactly what is missing before DOT's models fail to import."""
        names = [config.name for config in apps.get_app_configs()]
        if "oauth2_provider" not in names or names.index("oauth2_provider") > names.index(self.name):
            raise ImproperlyConfigured(
                'mcp_oauth needs django-oauth-toolkit listed before it: INSTALLED_APPS += ["oauth2_provider", "mcp_oauth"]'
            )
        super().import_models()

    def ready(self) -> None:
        # Imported here: wiring imports the models (and DOT's), which app loading forbids at this module's import.
        from mcp_oauth.wiring import wire

        wire(self)
