"""Fernet keys and encrypted rows for the elicitation tests: a fresh key list in the settings (the
``key`` fixture), providers, connections and stored secrets, the raw columns as the database holds them."""

from __future__ import annotations

import secrets

import pytest
from cryptography.fernet import Fernet
from oauth2_provider.models import (
    get_application_model,
)

from elicitation.crypto import decrypt
from elicitation.models import (
    StoredSecret,
    ThirdPartyConnection,
    ThirdPartyProvider,
)
from mcp_oauth.models import AuditEvent

Application = get_application_model()


def new_key() -> str:
    return Fernet.generate_key().decode()


def use_keys(settings, *keys) -> None:
    """ELICITATION["ENCRYPTION_KEYS"] = keys (newest first); the setting_changed receiver resets the cache."""
    settings.ELICITATION = {**getattr(settings, "ELICITATION", {}), "ENCRYPTION_KEYS": list(keys)}


@pytest.fixture
def key(settings):
    """A fresh Fernet key, the only one in ``ELICITATION["ENCRYPTION_KEYS"]``."""
    k = new_key()
    use_keys(settings, k)
    return k


def unique(label: str) -> str:
    """A plaintext no base64 ciphertext will contain by chance."""
    return f"{label}-{secrets.token_hex(16)}"


def make_provider(slug="acme", secret="", **fields) -> ThirdPartyProvider:
    defaults = {
        "name": slug.capitalize(),
        "issuer": f"https://{slug}.example.com",
        "authorization_endpoint": f"https://{slug}.example.com/authorize",
        "token_endpoint": f"https://{slug}.example.com/token",
        "client_id": f"site-at-{slug}",
    }
    provider = ThirdPartyProvider(slug=slug, **{**defaults, **fields})
    provider.client_secret = secret
    provider.save()
    return provider


def make_connection(user, provider, access="", refresh="", **fields) -> ThirdPartyConnection:
    connection = ThirdPartyConnection(user=user, provider=provider, scopes="read", **fields)
    connection.access_token = access or unique("access")
    connection.refresh_token = refresh
    connection.save()
    return connection


def make_secret(user, name="openai_key", value="") -> StoredSecret:
    secret = StoredSecret(user=user, name=name)
    secret.value = value or unique("value")
    secret.save()
    return secret


def raw(model, pk, *columns):
    """The columns as stored in the database (one row)."""
    row = model.objects.filter(pk=pk).values_list(*columns).get()
    return row if len(columns) > 1 else row[0]


def audit_events(kind=AuditEvent.Kind.CONNECTION_REVOKED):
    return list(AuditEvent.objects.filter(kind=kind).order_by("id"))


COLUMNS = {
    ThirdPartyConnection: ("access_token_encrypted", "refresh_token_encrypted"),
    ThirdPartyProvider: ("client_secret_encrypted",),
    StoredSecret: ("value_encrypted",),
}


def snapshot():
    return {
        (model, pk): dict(zip(columns, values, strict=True))
        for model, columns in COLUMNS.items()
        for pk, *values in model.objects.values_list("pk", *columns)
    }


def plaintexts():
    """Every stored value decrypted with the configured keys."""
    return {
        (model, pk): {column: decrypt(value) for column, value in values.items()}
        for (model, pk), values in snapshot().items()
    }
