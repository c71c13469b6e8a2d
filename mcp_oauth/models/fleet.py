"""What the hosts of one deployment must share, as the shared database knows it.

One :class:`FleetSecret` row per secret setting every host must hold the same (``SECRET_KEY``, the
requestState key ring, the elicitation Fernet key ring, …; :mod:`mcp_oauth.management.fleet`): the fingerprints
of the key ring of the last host that started, its primary (sealing, signing) key first. A
fingerprint is PBKDF2-HMAC-SHA256 of the key under the row's random salt: it tells whether two hosts
hold the same key and nothing about the key itself.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class FleetSecret(models.Model):
    """The fleet's record of one shared secret setting.

    ``setting``: the setting's name as a site writes it (``SECRET_KEY``,
    ``MCP_OAUTH["REQUEST_STATE_KEYS"]``); ``salt``: 32 hex digits; ``fingerprints``: a JSON list of
    64-hex-digit fingerprints, the primary key's first; ``host``: the host that wrote the row last."""

    setting = models.CharField(_("setting"), max_length=100, unique=True)
    salt = models.CharField(_("salt"), max_length=64)
    fingerprints = models.JSONField(_("key fingerprints"), default=list)
    host = models.CharField(_("recorded by host"), max_length=255, blank=True)
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("fleet secret")
        verbose_name_plural = _("fleet secrets")

    def __str__(self) -> str:
        return f"{self.setting} ({len(self.fingerprints)} keys)"
