"""The ``ELICITATION`` settings namespace (same style as ``MCP_OAUTH`` and DRF's ``api_settings``).

::

    ELICITATION = {
        # Fernet keys (urlsafe base64, 32 bytes each), newest first. Generate one with
        # python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"
        "ENCRYPTION_KEYS": [os.environ["ELICITATION_KEY_2"], os.environ["ELICITATION_KEY_1"]],
    }

Every key is optional; a missing key falls back to :data:`DEFAULTS`. Values are
read through :data:`elicitation_settings`, which reloads itself when a test
changes ``ELICITATION`` with ``override_settings`` (:mod:`elicitation.crypto` forgets its
keys on the same signal). No key holds a dotted path: nothing is imported from a string.
"""

from __future__ import annotations

from typing import Any

from django.core.signals import setting_changed

from mcp_oauth.settings import AppSettings

DEFAULTS: dict[str, Any] = {
    # Fernet keys that encrypt third-party tokens, provider client secrets and secure-input
    # values at rest, newest first: the first encrypts, every one decrypts (rotation: put a
    # new key first, run `manage.py rotate_elicitation_keys`, then drop the old one).
    # Kept apart from SECRET_KEY on purpose. Empty: nothing can be stored (system check W001).
    "ENCRYPTION_KEYS": [],
    # Lifetime of a URL-mode elicitation (its start link), in seconds. The security checklist
    # of SEP-1036 flows asks for at most 10 minutes.
    "URL_ELICITATION_TTL_SECONDS": 600,
    # MCP 2026-07-28: a client's retry whose URL flow (connect, secure input, external page) is
    # still in progress is held open (SSE keepalives) until the flow finishes or this many
    # seconds pass; then the tool runs, or the URL request is sent again.
    "URL_RETRY_WAIT_SECONDS": 120.0,
    # MCP 2025-11-25: how long elicit_url waits for the client's answer (accept / decline /
    # cancel) to its URL-mode elicitation/create, in seconds (its answer_timeout argument wins).
    "URL_ANSWER_TIMEOUT_SECONDS": 300.0,
    # How long the OAuth `state` of a third-party authorization stays valid (seconds).
    "STATE_TTL_SECONDS": 600,
    # Timeout of every HTTP request to a third-party authorization server (seconds).
    "HTTP_TIMEOUT_SECONDS": 10.0,
    # A third-party access token this close to its expiry (seconds) is refreshed before use.
    "REFRESH_MARGIN_SECONDS": 60,
    # Longest value accepted by the secure input page (characters).
    "SECRET_MAX_LENGTH": 4096,
    # A finishing URL elicitation writes its notifications/elicitation/complete (session outbox
    # row + notified_at) in its own transaction, and the session's streams are woken on commit.
    # False: the Celery task writes it after the commit (one broker hop later); the beat
    # reconciler covers both ways. Either way each notification is sent once.
    "NOTIFY_IN_TRANSACTION": True,
    # Finished and expired elicitations older than this are deleted by the cleanup task (days; None: never).
    "RETENTION_DAYS": 30,
    # Templates of the pages the user opens (override them in the site's own templates/).
    "START_TEMPLATE": "elicitation/start.html",
    "SECRET_TEMPLATE": "elicitation/secret.html",
    "DONE_TEMPLATE": "elicitation/done.html",
    "ERROR_TEMPLATE": "elicitation/error.html",
    "CONNECTIONS_TEMPLATE": "elicitation/connections.html",
}


#: ``settings.ELICITATION`` with :data:`DEFAULTS` behind it (unknown keys raise ``AttributeError``).
elicitation_settings = AppSettings("ELICITATION", DEFAULTS)


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "ELICITATION":
        elicitation_settings.reload()


setting_changed.connect(_reload)
