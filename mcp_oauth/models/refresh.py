"""Refresh-token generations: single-winner rotation with a grace window.

A *generation* is one step of a refresh-token family (RFC 9700 §4.14.2): the refresh
token issued with the authorization code is generation 1; refreshing any member of
generation *n* creates generation *n + 1* — at most once (``parent`` is unique, and the
rotation holds a row lock on generation *n*). A duplicate refresh of a member of the
just-rotated generation within ``MCP_OAUTH["REFRESH_TOKEN_GRACE_SECONDS"]`` gets a new
*sibling* pair in generation *n + 1*: fresh random values, stored hashed like every token,
which die with that generation when it is rotated in turn. See
:mod:`mcp_oauth.authorization_server.tokens.rotation`.
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings


class RefreshGeneration(models.Model):
    """One generation of a refresh-token family; ``rotated_at`` is set when its successor is created."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    token_family = models.UUIDField(_("token family"), null=True, blank=True, db_index=True)
    parent = models.OneToOneField(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="successor", verbose_name=_("parent")
    )
    scope = models.TextField(_("scopes"), blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    rotated_at = models.DateTimeField(_("rotated"), null=True, blank=True)
    # When the family's session began (the authorization code's exchange), copied to each successor:
    # the absolute session cap counts from it (mcp_oauth.authorization_server.tokens.session_limits).
    session_started_at = models.DateTimeField(_("session started"), default=timezone.now)

    class Meta:
        verbose_name = _("refresh-token generation")
        verbose_name_plural = _("refresh-token generations")

    def __str__(self) -> str:
        return f"generation {self.pk} of family {self.token_family}"


class RefreshTokenGeneration(models.Model):
    """The generation a refresh token belongs to (the winner of a rotation and its grace siblings)."""

    refresh_token = models.OneToOneField(
        oauth2_settings.REFRESH_TOKEN_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="mcp_generation",
    )
    generation = models.ForeignKey(RefreshGeneration, on_delete=models.CASCADE, related_name="members")
    sibling = models.BooleanField(_("issued in the grace window"), default=False)

    class Meta:
        verbose_name = _("refresh-token generation member")
        verbose_name_plural = _("refresh-token generation members")
