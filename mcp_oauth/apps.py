from importlib import import_module

from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.translation import gettext_lazy as _


class MCPOAuthConfig(AppConfig):
    """Wires the app: DOT secure defaults, system checks, default resource, tool, resource and prompt autodiscovery."""

    name = "mcp_oauth"
    verbose_name = _("MCP authorization")
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self) -> None:
        """Say exactly what is missing before DOT's models fail to import."""
        from django.apps import apps
        from django.core.exceptions import ImproperlyConfigured

        names = [config.name for config in apps.get_app_configs()]
        if "oauth2_provider" not in names or names.index("oauth2_provider") > names.index(self.name):
            raise ImproperlyConfigured(
                'mcp_oauth needs django-oauth-toolkit listed before it: INSTALLED_APPS += ["oauth2_provider", "mcp_oauth"]'
            )
        super().import_models()

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.utils.module_loading import autodiscover_modules
        from oauth2_provider.models import get_application_model

        from . import checks, features  # checks: registers the system checks
        from .authorization_server.auth_extensions import register_auth_extensions
        from .authorization_server.clients import connect_receivers as connect_client_receivers
        from .lifecycle import connect as connect_lifecycle
        from .lifecycle import connect_client
        from .resource_server.cache import connect_receivers
        from .settings import apply_dot_defaults, mcp_oauth_settings
        from .signals import sync_default_resource
        from .transport import sessions, wakeup

        apply_dot_defaults()
        checks.replace_dot_bcp_check()
        connect_receivers()
        connect_client_receivers()
        wakeup.connect_receivers()
        sessions.connect_receivers()
        features.install()
        connect_lifecycle(get_user_model())
        connect_client(get_application_model())
        post_migrate.connect(sync_default_resource, sender=self)
        register_auth_extensions()
        autodiscover_modules(mcp_oauth_settings.TOOLS_MODULE)
        autodiscover_modules(mcp_oauth_settings.RESOURCES_MODULE)
        autodiscover_modules(mcp_oauth_settings.PROMPTS_MODULE)
        for module in mcp_oauth_settings.TOOL_MODULES:
            try:
                import_module(module)
            except ModuleNotFoundError as exc:
                if exc.name != module:
                    raise  # the module exists; something it imports does not
                # reported by manage.py check (mcp_oauth.W021)
