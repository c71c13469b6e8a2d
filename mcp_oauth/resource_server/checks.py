"""System checks of the resource server (``manage.py check``): the decoded-token memo and how
revocations reach every process (the token cache, the revocation stamp).

Registered, with every role's, by :mod:`mcp_oauth.checks`."""

from __future__ import annotations

import os

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.db import DatabaseError

from mcp_oauth.models import AccessTokenSigningKey, ProtectedResource
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


def check_jwt_access_token_settings(app_configs, **kwargs):
    """E171 ``JWT_ACCESS_TOKEN_ALGORITHM`` is not ``ES256`` or ``RS256``; E172
    ``JWT_ACCESS_TOKEN_ENCRYPTION_KEYS`` is not None or a non-empty list of secrets of at least 32
    characters; E171 a number setting of JWT access tokens is not a number of at least 0."""
    messages: list[CheckMessage] = []
    if mcp_oauth_settings.JWT_ACCESS_TOKEN_ALGORITHM not in ("ES256", "RS256"):
        messages.append(
            Error('MCP_OAUTH["JWT_ACCESS_TOKEN_ALGORITHM"] must be "ES256" or "RS256".', id="mcp_oauth.E171")
        )
    for key in ("JWT_ACCESS_TOKEN_PUBLISH_SECONDS", "JWT_ACCESS_TOKEN_LEEWAY_SECONDS", "JWKS_MAX_AGE_SECONDS"):
        if not is_number(getattr(mcp_oauth_settings, key), 0):
            messages.append(Error(f'MCP_OAUTH["{key}"] must be a number of at least 0.', id="mcp_oauth.E171"))
    keys = mcp_oauth_settings.JWT_ACCESS_TOKEN_ENCRYPTION_KEYS
    if keys is not None and (
        not isinstance(keys, (list, tuple))
        or not keys
        or any(not isinstance(key, (str, bytes)) or len(key) < 32 for key in keys)
    ):
        messages.append(
            Error(
                'MCP_OAUTH["JWT_ACCESS_TOKEN_ENCRYPTION_KEYS"] must be None or a non-empty list of secrets of at '
                "least 32 characters.",
                id="mcp_oauth.E172",
            )
        )
    return messages


def check_jwt_access_token_keys(app_configs, databases=None, **kwargs):
    """E170 a protected resource issues JWT access tokens (``jwt_access_tokens``) but no signing key
    signs now (opaque tokens are issued instead); W173 it does with a token cache of each process's
    own in a site that looks multi-process (the deny-list of revoked JWTs reaches no other process).
    A database check: ``check --database default``; silent before ``migrate``."""
    if not databases or "default" not in databases:
        return []
    try:
        uris = list(ProtectedResource.objects.filter(jwt_access_tokens=True).values_list("uri", flat=True))
        signing = AccessTokenSigningKey.objects.signing() if uris else None
    except DatabaseError:
        return []
    messages: list[CheckMessage] = []
    if uris and signing is None:
        messages.append(
            Error(
                f"JWT access tokens are on for {', '.join(uris[:3])} but no access-token signing key signs now.",
                hint="Create one with: manage.py rotate_access_token_keys (opaque tokens are issued meanwhile).",
                id="mcp_oauth.E170",
            )
        )
    if uris and is_local() and _multi_process_signs():
        messages.append(
            Warning(
                "JWT access tokens are on with a token cache of each process's own: a revoked JWT access token "
                "is refused by the process that revoked it only, the others accept it until it expires.",
                hint='Point MCP_OAUTH["TOKEN_CACHE"] at a cache all processes share (Redis).',
                id="mcp_oauth.W173",
            )
        )
    return messages
