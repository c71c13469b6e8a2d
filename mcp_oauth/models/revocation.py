"""The revocation stamp: one row every process reads to learn that something was revoked.

With a token cache that is not shared (``MCP_OAUTH["TOKEN_CACHE"]`` on a per-process backend
such as the embedded default's ``LocMemCache``), an invalidation written into one process's cache
is not seen by the others. Every revocation, deletion or deactivation made with such a cache also
increments :attr:`RevocationStamp.version`, in the same transaction as the change; each process
re-reads it at most every ``MCP_OAUTH["REVOCATION_CHECK_SECONDS"]`` and drops what it cached
under an older value (:mod:`mcp_oauth.resource_server.revocation`).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

#: The primary key of the one row.
STAMP_PK = 1


class RevocationStamp(models.Model):
    """The one row (``pk`` 1): ``version`` grows by one with every revocation-like change (a token,
    user, client, resource or trust rule); ``config_version`` also with a change of a client,
    resource or trust rule (what the in-process registries keep)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=STAMP_PK, editable=False)
    version = models.BigIntegerField(_("version"), default=0)
    config_version = models.BigIntegerField(_("configuration version"), default=0)

    class Meta:
        verbose_name = _("revocation stamp")
        verbose_name_plural = _("revocation stamps")

    def __str__(self) -> str:
        return f"revocation stamp {self.version}"
