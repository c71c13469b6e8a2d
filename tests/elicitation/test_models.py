"""The elicitation models keep every secret encrypted at rest (connection tokens, provider client
secrets, stored secrets) and validate providers (endpoint URLs, enabled providers, PKCE for public clients)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured, ValidationError

from elicitation.crypto import DecryptionError, decrypt
from elicitation.models import (
    StoredSecret,
    ThirdPartyConnection,
    ThirdPartyProvider,
    validate_endpoint_url,
)
from elicitation.providers import store_connection
from tests.support.elicitation_keys import make_connection, make_provider, make_secret, new_key, raw, unique, use_keys

pytestmark = pytest.mark.django_db


def test_connection_tokens_are_stored_only_as_ciphertext(settings, key, user):
    provider = make_provider()
    access, refresh = unique("access"), unique("refresh")
    connection = make_connection(user, provider, access, refresh)
    stored_access, stored_refresh = raw(
        ThirdPartyConnection, connection.pk, "access_token_encrypted", "refresh_token_encrypted"
    )
    assert stored_access.startswith("gAAAAA") and stored_refresh.startswith("gAAAAA")
    assert access not in stored_access + stored_refresh and refresh not in stored_access + stored_refresh
    assert decrypt(stored_access) == access and decrypt(stored_refresh) == refresh
    fresh = ThirdPartyConnection.objects.get(pk=connection.pk)
    assert (fresh.access_token, fresh.refresh_token) == (access, refresh)
    # No plaintext column anywhere in the row.
    assert access not in str(ThirdPartyConnection.objects.filter(pk=connection.pk).values().get())

    use_keys(settings, new_key())
    fresh = ThirdPartyConnection.objects.get(pk=connection.pk)
    with pytest.raises(DecryptionError):
        fresh.access_token  # noqa: B018
    with pytest.raises(DecryptionError):
        fresh.refresh_token  # noqa: B018


def test_no_refresh_token_is_stored_as_empty(key, user):
    connection = make_connection(user, make_provider(), "at", None)
    assert raw(ThirdPartyConnection, connection.pk, "refresh_token_encrypted") == ""
    assert ThirdPartyConnection.objects.get(pk=connection.pk).refresh_token == ""


def test_provider_client_secret_is_stored_only_as_ciphertext(settings, key):
    secret = unique("client-secret")
    provider = make_provider(secret=secret)
    stored = raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    assert stored.startswith("gAAAAA") and secret not in stored
    assert ThirdPartyProvider.objects.get(pk=provider.pk).client_secret == secret
    assert secret not in str(ThirdPartyProvider.objects.filter(pk=provider.pk).values().get())

    provider.client_secret = None  # no secret: "" in the column
    provider.save()
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted") == ""

    provider.client_secret = secret
    provider.save()
    use_keys(settings, new_key())
    with pytest.raises(DecryptionError):
        ThirdPartyProvider.objects.get(pk=provider.pk).client_secret  # noqa: B018


def test_stored_secret_value_is_stored_only_as_ciphertext(settings, key, user):
    value = unique("sk-live")
    secret = make_secret(user, value=value)
    stored = raw(StoredSecret, secret.pk, "value_encrypted")
    assert stored.startswith("gAAAAA") and value not in stored
    assert StoredSecret.objects.get(pk=secret.pk).value == value
    use_keys(settings, new_key())
    with pytest.raises(DecryptionError):
        StoredSecret.objects.get(pk=secret.pk).value  # noqa: B018


def test_store_connection_encrypts_the_token_response(key, user):
    provider = make_provider()
    access, refresh = unique("access"), unique("refresh")
    connection = store_connection(
        user,
        provider,
        {"access_token": access, "refresh_token": refresh, "expires_in": 3600, "scope": "read write read"},
        ["read"],
    )
    stored_access, stored_refresh, scopes = raw(
        ThirdPartyConnection, connection.pk, "access_token_encrypted", "refresh_token_encrypted", "scopes"
    )
    assert access not in stored_access and refresh not in stored_refresh
    assert (decrypt(stored_access), decrypt(stored_refresh), scopes) == (access, refresh, "read write")
    # Storing again replaces the tokens of the same row.
    again = store_connection(user, provider, {"access_token": "second"}, ["read"])
    assert again.pk == connection.pk
    assert ThirdPartyConnection.objects.count() == 1
    assert raw(ThirdPartyConnection, connection.pk, "refresh_token_encrypted") == ""
    assert ThirdPartyConnection.objects.get(pk=connection.pk).access_token == "second"


def test_storing_without_keys_is_refused(settings, user):
    use_keys(settings)
    provider = make_provider()  # no secret: nothing to encrypt
    with pytest.raises(ImproperlyConfigured):
        make_connection(user, provider, "at")
    assert ThirdPartyConnection.objects.count() == 0


def test_provider_clean_refuses_an_enabled_provider_without_endpoints():
    provider = ThirdPartyProvider(slug="x", name="X", client_id="c", issuer="https://x.example.com")
    with pytest.raises(ValidationError) as excinfo:
        provider.clean()
    assert excinfo.value.messages == [
        "An enabled provider needs its authorization and token endpoints (or discover them from the issuer)."
    ]
    provider.token_endpoint = "https://x.example.com/token"
    with pytest.raises(ValidationError):
        provider.clean()  # one of the two is not enough
    provider.enabled = False
    provider.clean()  # a disabled provider may wait for discovery
    provider.enabled, provider.authorization_endpoint = True, "https://x.example.com/authorize"
    provider.clean()


def test_provider_clean_refuses_a_public_client_without_pkce():
    provider = ThirdPartyProvider(
        slug="x",
        name="X",
        client_id="c",
        authorization_endpoint="https://x.example.com/a",
        token_endpoint="https://x.example.com/t",
        token_endpoint_auth_method="none",
        use_pkce=False,
    )
    with pytest.raises(ValidationError) as excinfo:
        provider.clean()
    assert excinfo.value.messages == ["A public client must use PKCE."]
    provider.token_endpoint_auth_method = "client_secret_post"
    provider.clean()  # a confidential client may go without PKCE at a provider that lacks it
    provider.token_endpoint_auth_method, provider.use_pkce = "none", True
    provider.clean()


@pytest.mark.parametrize(
    "url",
    [
        "https://auth.example.com/authorize",
        "https://auth.example.com:8443/x?a=1",
        "http://127.0.0.1:8000/oauth/token",
        "http://localhost/x",
        "http://[::1]:9000/x",
        "http://127.0.0.2/x",
        "",
    ],
)
def test_validate_endpoint_url_accepts(url):
    validate_endpoint_url(url)


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://auth.example.com/authorize", "scheme"),
        ("http://10.0.0.1/token", "scheme"),
        (
            "http://dev.localhost/x",
            "scheme",
        ),  # only localhost itself and loopback IP literals (mcp_oauth.shared.loopback)
        ("ftp://auth.example.com/x", "scheme"),
        ("javascript:alert(1)", "scheme"),
        ("https:///nohost", "scheme"),
        ("https://user:pass@auth.example.com/x", "url"),
        ("https://user@auth.example.com/x", "url"),
        ("http://user@127.0.0.1/x", "url"),
        ("https://auth.example.com/x#fragment", "url"),
    ],
)
def test_validate_endpoint_url_refuses(url, code):
    with pytest.raises(ValidationError) as excinfo:
        validate_endpoint_url(url)
    assert excinfo.value.code == code
