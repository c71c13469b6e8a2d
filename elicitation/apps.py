from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ElicitationConfig(AppConfig):
    """The elicitation app: form and URL modes, third-party connections, the secure input page."""

    name = "elicitation"
    verbose_name = _("MCP elicitation")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here: the wiring imports the models (through the signals), which app loading
        # forbids at this module's import.
        from elicitation.wiring import wire

        wire()
