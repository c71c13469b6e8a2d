"""Encryption at rest for third-party tokens, provider secrets and secure-input values.

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) with a key list:
``ELICITATION["ENCRYPTION_KEYS"]``, newest first. :func:`encrypt` uses the first
key; :func:`decrypt` tries each (``MultiFernet``); :func:`rotate` re-encrypts a
value under the first key. The keys are not derived from ``SECRET_KEY``: rotating
one does not touch the other.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from elicitation.settings import elicitation_settings

__all__ = ["DecryptionError", "decrypt", "encrypt", "keys_configured", "rotate"]


class DecryptionError(Exception):
    """A stored value could not be decrypted with any configured key (missing key, or tampered data)."""


@lru_cache(maxsize=1)
def _fernet() -> MultiFernet:
    keys = elicitation_settings.ENCRYPTION_KEYS
    if isinstance(keys, (str, bytes)):
        keys = [keys]
    if not keys:
        raise ImproperlyConfigured(
            'ELICITATION["ENCRYPTION_KEYS"] is empty: third-party tokens and secrets cannot be stored. '
            'Generate a key with: python -c "from cryptography.fernet import Fernet; '
            'print(Fernet.generate_key().decode())"'
        )
    try:
        return MultiFernet([Fernet(key) for key in keys])
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(
            'ELICITATION["ENCRYPTION_KEYS"] holds a value that is not a Fernet key (32 bytes, urlsafe base64)'
        ) from exc


def reset() -> None:
    """Forget the cached keys (settings changed)."""
    _fernet.cache_clear()


def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    # Connected after elicitation.settings' own receiver (imported above): the settings are
    # reloaded first, so the next _fernet() reads the new keys.
    if setting == "ELICITATION":
        reset()


setting_changed.connect(_reset_on_change, dispatch_uid="elicitation.crypto.reset")


def keys_configured() -> bool:
    """Whether the key list is set and valid."""
    try:
        _fernet()
    except ImproperlyConfigured:
        return False
    return True


def encrypt(value: str) -> str:
    """``value`` encrypted under the newest key, as ASCII text ("" stays "").

    :raises ImproperlyConfigured: no (valid) key is configured.
    """
    if value == "":
        return ""
    return _fernet().encrypt(value.encode("utf-8")).decode("ascii")


def _open(operation, token: str) -> str:
    if token == "":
        return ""
    try:
        return operation(token.encode("ascii"))
    except (InvalidToken, UnicodeError) as exc:
        raise DecryptionError("stored value cannot be decrypted with the configured keys") from exc


def decrypt(token: str) -> str:
    """The plaintext of :func:`encrypt`'s output ("" stays "").

    :raises DecryptionError: no configured key opens it (the key was removed, or the data was changed).
    :raises ImproperlyConfigured: no (valid) key is configured.
    """
    return _open(lambda data: _fernet().decrypt(data).decode("utf-8"), token)


def rotate(token: str) -> str:
    """``token`` re-encrypted under the newest key (same plaintext).

    :raises DecryptionError: no configured key opens it.
    :raises ImproperlyConfigured: no (valid) key is configured.
    """
    return _open(lambda data: _fernet().rotate(data).decode("ascii"), token)
