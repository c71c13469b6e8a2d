"""DPoP key bindings of issued tokens (RFC 9449 §6, §5).

A token issued with a DPoP proof is bound to the proof's public key: its JWK SHA-256
thumbprint (RFC 7638), the ``cnf.jkt`` of the token (RFC 9449 §6.1). DOT's token tables are
not ours, so the binding is a row of its own, keyed by the token's SHA-256 (DOT's
``token_checksum``), written *before* the token rows: a bound token never exists unbound,
not even for a moment. A grant that then fails leaves a row naming a token that never
existed, which :func:`mcp_oauth.dpop.bindings.prune_bindings` removes with the expired ones.

Access tokens and the refresh tokens of public clients (RFC 9449 §5.4) are bound this way.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class DPoPBinding(models.Model):
    """One token bound to one DPoP key.

    * ``token_checksum``: SHA-256 hex of the token value (the access or refresh token);
    * ``jkt``: base64url SHA-256 JWK thumbprint of the key (RFC 7638, 43 characters);
    * ``token_kind``: ``access_token`` or ``refresh_token``;
    * ``expires``: when the token expires (the row can go then).
    """

    class Kind(models.TextChoices):
        ACCESS_TOKEN = "access_token", _("access token")
        REFRESH_TOKEN = "refresh_token", _("refresh token")

    token_checksum = models.CharField(_("token checksum"), max_length=64, unique=True)
    jkt = models.CharField(_("JWK thumbprint"), max_length=64, db_index=True)
    token_kind = models.CharField(_("token kind"), max_length=16, choices=Kind.choices)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    expires = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)

    class Meta:
        verbose_name = _("DPoP binding")
        verbose_name_plural = _("DPoP bindings")

    def __str__(self) -> str:
        return f"{self.token_kind} bound to {self.jkt}"
