"""The elicitation app's part of the secrets every host must share (:mod:`mcp_oauth.management.fleet`): its
Fernet key ring, ``ELICITATION["ENCRYPTION_KEYS"]`` (the key that encrypts first). Connected to
:data:`mcp_oauth.signals.shared_secrets` by :mod:`elicitation.wiring`."""

from __future__ import annotations

from typing import Any

from elicitation.settings import elicitation_settings

SETTING = 'ELICITATION["ENCRYPTION_KEYS"]'


def add_encryption_keys(sender: Any, secrets: dict[str, Any], **kwargs: Any) -> None:
    """``secrets[SETTING] = [key, …]`` (newest first, as configured; empty: nothing to compare)."""
    keys = elicitation_settings.ENCRYPTION_KEYS
    secrets[SETTING] = [keys] if isinstance(keys, (str, bytes)) else list(keys or [])
