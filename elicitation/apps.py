from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ElicitationConfig(AppConfig):
    """The elicitation app: form and URL modes, third-party connections, the secure input page."""

    name = "elicitation"
    verbose_name = _("MCP elicitation")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here (registering the checks and receivers): signals imports the models, which
        # app loading forbids at this module's import.
        from elicitation import checks, dashboard, signals, user_data  # noqa: F401
        from mcp_oauth.signals import admin_dashboard, user_data_erase, user_data_export

        user_data_erase.connect(user_data.erase_rows, dispatch_uid="elicitation.user_data.erase")
        user_data_export.connect(user_data.export_sections, dispatch_uid="elicitation.user_data.export")
        admin_dashboard.connect(dashboard.add_panel, dispatch_uid="elicitation.dashboard")
