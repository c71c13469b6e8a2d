"""The subject and actor of a token issued by token exchange (RFC 8693 §4.1 ``act``).

An access token issued for another protected resource on the user's behalf (delegation) carries
the ``act`` claim naming who acts: ``{"sub": "<client_id of the exchanging client>"}``, with the
subject token's own ``act`` nested inside when it had one (a chain of exchanges, §4.1). DOT's
token table is not ours, so, like :class:`~mcp_oauth.models.DPoPBinding` and
:class:`~mcp_oauth.models.TokenOrganization`, the actor is a row of its own keyed by the token's
SHA-256 (DOT's ``token_checksum``), written *before* the token row: a delegated token never exists
without its actor. Every exchanged token has its row, a down-scoped one with ``act`` null: it names
the subject token, whose revocation revokes the tokens exchanged for it. A grant that then fails
leaves a row naming no token, pruned with the expired ones
(:func:`mcp_oauth.authorization_server.token_exchange.actor.prune_token_actors`).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class TokenActor(models.Model):
    """One exchanged access token: its subject token and its ``act`` claim.

    * ``token_checksum``: SHA-256 hex of the access token value;
    * ``act``: the RFC 8693 §4.1 claim value, a JSON object (``{"sub": ..., "act"?: {...}}``), or
      null for a down-scoped token (same resource: nobody else acts);
    * ``subject_token_checksum``: SHA-256 hex of the subject token it was exchanged for (revoked
      with it; audit, admin);
    * ``expires``: when the token expires (the row can go then).
    """

    token_checksum = models.CharField(_("token checksum"), max_length=64, unique=True)
    act = models.JSONField(_("actor (act claim)"), null=True, blank=True)
    subject_token_checksum = models.CharField(_("subject token checksum"), max_length=64, blank=True, db_index=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    expires = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)

    class Meta:
        verbose_name = _("token actor")
        verbose_name_plural = _("token actors")

    def __str__(self) -> str:
        """``delegated to client <sub>`` (the acting client's ``client_id``), or ``down-scoped``."""
        sub = self.act.get("sub") if isinstance(self.act, dict) else None
        return f"delegated to client {sub}" if sub else "down-scoped"
