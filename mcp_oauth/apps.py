from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class MCPOAuthConfig(AppConfig):
    """Wires the app: DOT secure defaults, system checks, default resource, tool, resource and prompt autodiscovery."""

    name = "mcp_oauth"
    verbose_name = _("MCP authorization")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.utils.module_loading import autodiscover_modules

        from . import checks  # noqa: F401 - registers the system checks
        from .settings import apply_dot_defaults, mcp_oauth_settings
        from .signals import sync_default_resource

        apply_dot_defaults()
        post_migrate.connect(sync_default_resource, sender=self)
        autodiscover_modules(mcp_oauth_settings.TOOLS_MODULE)
        autodiscover_modules(mcp_oauth_settings.RESOURCES_MODULE)
        autodiscover_modules(mcp_oauth_settings.PROMPTS_MODULE)
