"""System checks of the elicitation app (``manage.py check``).

* ``elicitation.W001`` — ``ELICITATION["ENCRYPTION_KEYS"]`` is empty: nothing can be stored
  (third-party connections, client secrets, secure input).
* ``elicitation.E002`` — a key is not a Fernet key.
* ``elicitation.E003`` — a key is ``SECRET_KEY`` itself (the keys must be independent of it).
* ``elicitation.E004`` — the app's URLs are not included (``path("elicitation/", include("elicitation.urls"))``).
"""

from __future__ import annotations

from cryptography.fernet import Fernet
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.urls import NoReverseMatch, reverse

from elicitation.settings import elicitation_settings


@register(Tags.security)
def check_encryption_keys(app_configs=None, **kwargs):
    keys = elicitation_settings.ENCRYPTION_KEYS
    if isinstance(keys, (str, bytes)):
        keys = [keys]
    if not keys:
        return [
            Warning(
                'ELICITATION["ENCRYPTION_KEYS"] is empty: third-party connections, provider client secrets '
                "and secure-input values cannot be stored.",
                hint='Generate a key: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"',
                id="elicitation.W001",
            )
        ]
    errors = []
    for index, key in enumerate(keys):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            errors.append(
                Error(
                    f'ELICITATION["ENCRYPTION_KEYS"][{index}] is not a Fernet key (32 bytes, urlsafe base64).',
                    id="elicitation.E002",
                )
            )
            continue
        secret = getattr(settings, "SECRET_KEY", None)
        if secret and (key == secret or (isinstance(key, bytes) and key.decode("ascii", "ignore") == secret)):
            errors.append(
                Error(
                    f'ELICITATION["ENCRYPTION_KEYS"][{index}] is SECRET_KEY; use an independent key.',
                    id="elicitation.E003",
                )
            )
    return errors


@register(Tags.urls)
def check_urls(app_configs=None, **kwargs):
    try:
        reverse("elicitation:connections")
    except (NoReverseMatch, ImproperlyConfigured):
        return [
            Error(
                "The elicitation pages are not routed: URL-mode links would lead nowhere.",
                hint='Add path("elicitation/", include("elicitation.urls")) to your ROOT_URLCONF.',
                id="elicitation.E004",
            )
        ]
    return []
