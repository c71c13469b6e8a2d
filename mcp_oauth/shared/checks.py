"""System checks of the settings every role reads (``manage.py check``): ``BASE_URL``, the browser
pages' referrer policy, the task queue; and :func:`is_number`, for the other roles' checks.

Registered, with every role's, by :mod:`mcp_oauth.checks`."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.taskqueue import celery_configured


def check_base_url(app_configs, **kwargs):
    """E001 BASE_URL missing or malformed; W002 http on a non-loopback host; E003 issuer with a trailing slash."""
    messages: list[CheckMessage] = []
    base = mcp_oauth_settings.BASE_URL
    if not base:
        return [
            Error(
                'MCP_OAUTH["BASE_URL"] is not set.',
                hint='Set it to the site\'s public origin, e.g. "https://mcp.example.com".',
                id="mcp_oauth.E001",
            )
        ]
    parts = urlsplit(str(base))
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        messages.append(Error(f'MCP_OAUTH["BASE_URL"] {base!r} is not an http(s) origin.', id="mcp_oauth.E001"))
    elif parts.scheme == "http" and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        messages.append(
            Warning(
                f'MCP_OAUTH["BASE_URL"] {base!r} uses http on a non-loopback host.',
                hint="OAuth 2.1 §1.5 and the MCP authorization spec require https for every endpoint but loopback.",
                id="mcp_oauth.W002",
            )
        )
    issuer = mcp_oauth_settings.ISSUER
    if issuer and str(issuer).endswith("/"):
        messages.append(Error('MCP_OAUTH["ISSUER"] must not end with "/".', id="mcp_oauth.E003"))
    return messages


def check_referrer_policy(app_configs, **kwargs):
    """W032 ``SECURE_REFERRER_POLICY`` includes ``no-referrer``: browsers then send ``Origin: null``
    on the form POSTs of the site's own pages (WHATWG Fetch, "serialize a request origin"), and
    Django's CSRF check refuses them, so nobody can sign in on the site's login page to approve a
    client. The app's own pages send ``same-origin`` whatever the site's setting."""
    policy = getattr(settings, "SECURE_REFERRER_POLICY", None)
    values = [policy] if isinstance(policy, str) else list(policy or [])
    names = {part.strip().lower() for value in values for part in str(value).split(",")}
    if "no-referrer" not in names:
        return []
    return [
        Warning(
            "SECURE_REFERRER_POLICY is 'no-referrer': browsers send 'Origin: null' on form POSTs and Django's "
            "CSRF check refuses them (the site's login page among them).",
            hint='Use "same-origin": no URL (authorization request, code, elicitation id) reaches another site, '
            "and form POSTs carry their real Origin.",
            id="mcp_oauth.W032",
        )
    ]


def check_task_queue(app_configs, **kwargs):
    """W050 (deploy) no Celery app: tasks run in-process, and the periodic tasks run only if scheduled elsewhere."""
    if celery_configured():
        return []
    return [
        Warning(
            "No Celery app is configured: the app's tasks run in-process (CIMD fetches, elicitation "
            "notifications), and its periodic tasks (mcp_oauth.tasks.cleanup, mcp_oauth.tasks.prune_dynamic_clients, "
            "mcp_oauth.tasks.prune_refresh_generations, mcp_oauth.mcp_tasks.reconcile, "
            "elicitation.tasks.reconcile_completion_notifications, elicitation.tasks.expire_elicitations, "
            "elicitation.tasks.cleanup) never run: nothing is pruned (the retention settings are not applied).",
            hint="Give the site a Celery app and beat schedule (see project/celery.py and CELERY_BEAT_SCHEDULE of "
            "django-mcp-authz), or call those tasks from your own scheduler.",
            id="mcp_oauth.W050",
        )
    ]


def is_number(value, minimum: float, above: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return value > minimum if above else value >= minimum
