"""System checks of the resource server (``manage.py check``): the decoded-token memo and how
revocations reach every process (the token cache, the revocation stamp).

Registered, with every role's, by :mod:`mcp_oauth.checks`."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning

from mcp_oauth.resource_server.revocation import is_local
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.checks import is_number


def check_decoded_token_entries(app_configs, **kwargs):
    """E070 ``DECODED_TOKEN_ENTRIES`` is not a non-negative integer (the bearer check of every
    request would fail on it)."""
    size = mcp_oauth_settings.DECODED_TOKEN_ENTRIES
    if isinstance(size, int) and not isinstance(size, bool) and size >= 0:
        return []
    return [
        Error(
            'MCP_OAUTH["DECODED_TOKEN_ENTRIES"] must be an integer of at least 0 (0: keep none).',
            id="mcp_oauth.E070",
        )
    ]


def _multi_process_signs() -> list[str]:
    """What says that this site runs in more than one process besides management commands."""
    signs = []
    if settings.DATABASES.get("default", {}).get("ENGINE", "").endswith(("postgresql", "mysql", "oracle")):
        signs.append("a database server (several processes or hosts can reach it)")
    if getattr(settings, "CELERY_BROKER_URL", None) and not getattr(settings, "CELERY_TASK_ALWAYS_EAGER", False):
        signs.append("a Celery broker (tasks run in worker processes)")
    if mcp_oauth_settings.WAKEUP_URL:
        signs.append('MCP_OAUTH["WAKEUP_URL"] (wake-ups between processes)')
    for name in ("WEB_CONCURRENCY", "WORKERS"):
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            signs.append(f"{name}={value}")
    return signs


def check_revocation_settings(app_configs, **kwargs):
    """E071 ``REVOCATION_CHECK_SECONDS`` is not a number of at least 0, or ``TOKEN_CACHE_SHARED``
    is not None, True or False. W071 the token cache is not shared between processes
    (``LocMemCache``, or ``TOKEN_CACHE_SHARED`` False) in a site that looks multi-process:
    changes made by another process are honoured within ``REVOCATION_CHECK_SECONDS`` (the
    revocation stamp, :mod:`mcp_oauth.resource_server.revocation`), not at once."""
    messages: list[CheckMessage] = []
    interval = mcp_oauth_settings.REVOCATION_CHECK_SECONDS
    if not is_number(interval, 0):
        messages.append(
            Error('MCP_OAUTH["REVOCATION_CHECK_SECONDS"] must be a number of at least 0.', id="mcp_oauth.E071")
        )
    if mcp_oauth_settings.TOKEN_CACHE_SHARED not in (None, True, False):
        messages.append(Error('MCP_OAUTH["TOKEN_CACHE_SHARED"] must be None, True or False.', id="mcp_oauth.E071"))
    if messages or not is_local():
        return messages
    signs = _multi_process_signs()
    if signs:
        messages.append(
            Warning(
                f'MCP_OAUTH["TOKEN_CACHE"] ({mcp_oauth_settings.TOKEN_CACHE!r}) is a cache of each process\'s own, '
                f"and this site looks multi-process ({'; '.join(signs)}).",
                hint=(
                    "A revocation, deletion or deactivation made by another process (a worker, a Celery task, "
                    "manage.py) reaches this one through the database's revocation stamp, re-read at most every "
                    f"REVOCATION_CHECK_SECONDS ({interval} s): one query per process per interval, and every "
                    "cached token looked up again after each change anywhere. Point TOKEN_CACHE at a cache all "
                    "processes share (Redis) for revocation at once and no stamp queries, or silence "
                    "mcp_oauth.W071 (SILENCED_SYSTEM_CHECKS) to keep this trade-off."
                ),
                id="mcp_oauth.W071",
            )
        )
    return messages
