from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ElicitationConfig(AppConfig):
    """The elicitation app: the :class:`~elicitation.models.Elicitation` log and the tool-facing API."""

    name = "elicitation"
    verbose_name = _("MCP elicitation")
    default_auto_field = "django.db.models.BigAutoField"
