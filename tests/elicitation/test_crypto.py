"""Encryption at rest of the elicitation app: the Fernet key list, the encrypted model properties,
key rotation, undecryptable connections, the admin (write-only secrets, revoke, discovery), the
system checks and the management commands (``rotate_elicitation_keys``, ``ensure_oauth_client``,
``ensure_demo_provider``).

Tests that need a real provider endpoint (RFC 8414 metadata, RFC 7009 revocation) run this
project in a live uvicorn thread (:mod:`tests.support.live`) and use it as the third party.
"""

from __future__ import annotations

import io
import secrets
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet
from django.contrib import messages as message_levels
from django.contrib.auth.hashers import check_password
from django.core.checks import run_checks
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.forms import PasswordInput
from django.http import HttpResponse
from django.urls import path, reverse
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
    set_token_value,
)

from elicitation import checks, crypto
from elicitation.crypto import DecryptionError, decrypt, encrypt, keys_configured, rotate
from elicitation.models import (
    Elicitation,
    StoredSecret,
    ThirdPartyConnection,
    ThirdPartyProvider,
    validate_endpoint_url,
)
from elicitation.providers import fresh_access_token, revoke_connection, store_connection
from mcp_oauth.models import AuditEvent, ProtectedResource
from tests.support.live import free_port, run_asgi_server

pytestmark = pytest.mark.django_db

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()


# A URLconf without the elicitation pages (``elicitation.E004``): ROOT_URLCONF = __name__.
def _nothing(request):
    return HttpResponse("ok")


urlpatterns = [path("", _nothing)]


def new_key() -> str:
    return Fernet.generate_key().decode()


def use_keys(settings, *keys) -> None:
    """ELICITATION["ENCRYPTION_KEYS"] = keys (newest first); the setting_changed receiver resets the cache."""
    settings.ELICITATION = {**getattr(settings, "ELICITATION", {}), "ENCRYPTION_KEYS": list(keys)}


def unique(label: str) -> str:
    """A plaintext no base64 ciphertext will contain by chance."""
    return f"{label}-{secrets.token_hex(16)}"


@pytest.fixture
def key(settings):
    k = new_key()
    use_keys(settings, k)
    return k


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


# --------------------------------------------------------------------------------------------
# 1. crypto
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "plaintext", ["a", "päss wörd ✓ — 🔑 日本語", "x" * 5000, " leading and trailing ", "line\nbreak\x00nul"]
)
def test_round_trip(key, plaintext):
    token = encrypt(plaintext)
    assert isinstance(token, str)
    assert token.isascii()
    assert token.startswith("gAAAAA")  # a Fernet token: version byte 0x80, then the timestamp
    assert token != plaintext
    assert decrypt(token) == plaintext


def test_empty_string_stays_empty_even_without_keys(settings):
    use_keys(settings)
    assert encrypt("") == ""
    assert decrypt("") == ""
    assert rotate("") == ""


def test_ciphertext_differs_per_call_and_never_contains_the_plaintext(key):
    plaintext = unique("token")
    first, second = encrypt(plaintext), encrypt(plaintext)
    assert first != second
    assert plaintext not in first and plaintext not in second
    assert plaintext.encode().hex() not in first
    assert decrypt(first) == decrypt(second) == plaintext


def test_wrong_key_list_raises_decryption_error(settings, key):
    token = encrypt("secret value")
    use_keys(settings, new_key(), new_key())
    with pytest.raises(DecryptionError, match="cannot be decrypted with the configured keys"):
        decrypt(token)
    with pytest.raises(DecryptionError):
        rotate(token)


def test_tampered_ciphertext_raises_decryption_error(key):
    token = encrypt("secret value")
    middle = len(token) // 2
    tampered = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    for bad in (tampered, token[:-4], token[:40], "not a fernet token", "gAAAAAé", encrypt("other")[:60] + token[60:]):
        with pytest.raises(DecryptionError):
            decrypt(bad)


def test_empty_key_list_is_improperly_configured_with_a_helpful_message(settings):
    use_keys(settings)
    with pytest.raises(ImproperlyConfigured) as excinfo:
        encrypt("x")
    message = str(excinfo.value)
    assert message.startswith(
        'ELICITATION["ENCRYPTION_KEYS"] is empty: third-party tokens and secrets cannot be stored.'
    )
    assert "Fernet.generate_key().decode()" in message
    with pytest.raises(ImproperlyConfigured):
        decrypt("gAAAAAxyz")
    assert keys_configured() is False


def test_missing_elicitation_setting_means_no_keys(settings):
    del settings.ELICITATION
    assert keys_configured() is False
    with pytest.raises(ImproperlyConfigured):
        encrypt("x")


@pytest.mark.parametrize("bad", ["not-a-key", "", Fernet.generate_key().decode()[:-4], 42, None])
def test_invalid_key_is_improperly_configured(settings, bad):
    use_keys(settings, new_key(), bad)  # one bad key in the list is enough
    with pytest.raises(
        ImproperlyConfigured, match=r"holds a value that is not a Fernet key \(32 bytes, urlsafe base64\)"
    ):
        encrypt("x")
    assert keys_configured() is False


def test_keys_configured(settings):
    use_keys(settings, new_key())
    assert keys_configured() is True
    use_keys(settings, new_key(), new_key())
    assert keys_configured() is True
    use_keys(settings)
    assert keys_configured() is False


def test_a_single_key_string_or_bytes_is_accepted(settings):
    k = new_key()
    settings.ELICITATION = {"ENCRYPTION_KEYS": k}
    token = encrypt("value")
    settings.ELICITATION = {"ENCRYPTION_KEYS": k.encode()}
    assert keys_configured() is True
    assert decrypt(token) == "value"


def test_newest_key_encrypts_every_key_decrypts(settings):
    old, new = new_key(), new_key()
    use_keys(settings, old)
    under_old = encrypt("first")
    use_keys(settings, new, old)
    under_new = encrypt("second")
    assert decrypt(under_old) == "first"
    assert decrypt(under_new) == "second"
    use_keys(settings, new)  # the new key alone opens what was encrypted after it came first
    assert decrypt(under_new) == "second"
    with pytest.raises(DecryptionError):
        decrypt(under_old)
    use_keys(settings, old)
    with pytest.raises(DecryptionError):
        decrypt(under_new)


def test_rotate_re_encrypts_under_the_newest_key(settings):
    old, new = new_key(), new_key()
    use_keys(settings, old)
    token = encrypt("rotated value")
    use_keys(settings, new, old)
    rotated = rotate(token)
    assert rotated != token
    use_keys(settings, new)
    assert decrypt(rotated) == "rotated value"


def test_changing_the_setting_resets_the_cached_keys(settings):
    use_keys(settings, new_key())
    token = encrypt("value")
    assert crypto._fernet.cache_info().currsize == 1
    use_keys(settings, new_key())
    assert crypto._fernet.cache_info().currsize == 0
    with pytest.raises(DecryptionError):
        decrypt(token)


# --------------------------------------------------------------------------------------------
# 2. encrypted model properties
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# 3. rotation
# --------------------------------------------------------------------------------------------


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


def rotate_keys():
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("rotate_elicitation_keys", stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), str(exc)
    return out.getvalue(), err.getvalue(), None


def test_rotation_re_encrypts_every_value_under_the_new_key(settings, user, other_user):
    old, new = new_key(), new_key()
    use_keys(settings, old)
    with_secret = make_provider("acme", secret=unique("client-secret"))
    make_provider("public", secret="", token_endpoint_auth_method="none")
    make_connection(user, with_secret, unique("access"), unique("refresh"))
    make_connection(other_user, with_secret, unique("access"), "")
    make_secret(user)
    before, values = snapshot(), plaintexts()

    use_keys(settings, new, old)
    out, err, error = rotate_keys()
    assert (out, err, error) == ("5 row(s) re-encrypted under the newest key, 0 could not be decrypted.\n", "", None)

    after = snapshot()
    assert after.keys() == before.keys()
    for row, columns in before.items():
        for column, value in columns.items():
            if value:
                assert after[row][column] != value, (row, column)
            else:
                assert after[row][column] == "", (row, column)  # no value stays no value

    use_keys(settings, new)  # the old key is gone: everything still opens
    assert plaintexts() == values
    use_keys(settings, old)  # and nothing is under the old key any more
    with pytest.raises(DecryptionError):
        plaintexts()


def test_rotation_reports_undecryptable_rows_and_rotates_the_others(settings, user, other_user):
    lost, old, new = new_key(), new_key(), new_key()
    use_keys(settings, lost)
    orphan = make_secret(user, "orphan")
    lost_refresh = encrypt(unique("refresh"))
    use_keys(settings, old)
    provider = make_provider(secret=unique("client-secret"))
    good = make_connection(user, provider, unique("access"), unique("refresh"))
    # Access token under a configured key, refresh token under the lost one: the row is left whole.
    mixed = make_connection(other_user, provider, unique("access"))
    ThirdPartyConnection.objects.filter(pk=mixed.pk).update(refresh_token_encrypted=lost_refresh)
    kept = make_secret(other_user, "kept")
    before = snapshot()
    unreadable = {(StoredSecret, orphan.pk), (ThirdPartyConnection, mixed.pk)}
    good_values = plaintexts_where(before, exclude=unreadable)

    use_keys(settings, new, old)
    out, err, error = rotate_keys()
    assert error == "2 row(s) could not be decrypted with the configured keys"
    assert out == "3 row(s) re-encrypted under the newest key, 2 could not be decrypted.\n"
    assert err.splitlines() == [
        f"elicitation.ThirdPartyConnection {mixed.pk}: no configured key opens it; left unchanged",
        f"elicitation.StoredSecret {orphan.pk}: no configured key opens it; left unchanged",
    ]
    after = snapshot()
    assert after[(StoredSecret, orphan.pk)] == before[(StoredSecret, orphan.pk)]
    assert after[(ThirdPartyConnection, mixed.pk)] == before[(ThirdPartyConnection, mixed.pk)]
    for row in [(ThirdPartyConnection, good.pk), (ThirdPartyProvider, provider.pk), (StoredSecret, kept.pk)]:
        assert all(after[row][c] != before[row][c] for c in before[row]), row

    use_keys(settings, new)
    assert plaintexts_where(after, exclude=unreadable) == good_values
    use_keys(settings, lost)
    assert StoredSecret.objects.get(pk=orphan.pk).value  # the orphan still opens with its own key


def plaintexts_where(rows, exclude):
    return {
        row: {column: decrypt(value) for column, value in values.items()}
        for row, values in rows.items()
        if row not in exclude
    }


def test_rotation_without_keys_is_a_command_error(settings, user):
    use_keys(settings, new_key())
    secret = make_secret(user)
    stored = raw(StoredSecret, secret.pk, "value_encrypted")
    for keys in ([], ["not-a-key"]):
        use_keys(settings, *keys)
        out, err, error = rotate_keys()
        assert error == 'ELICITATION["ENCRYPTION_KEYS"] is empty or holds an invalid key: nothing can be re-encrypted.'
        assert out == ""
    assert raw(StoredSecret, secret.pk, "value_encrypted") == stored


def test_rotation_of_an_empty_database(key):
    assert rotate_keys() == ("0 row(s) re-encrypted under the newest key, 0 could not be decrypted.\n", "", None)


# --------------------------------------------------------------------------------------------
# 4. undecryptable connections are dropped on use
# --------------------------------------------------------------------------------------------


def test_fresh_access_token_returns_the_decrypted_token(key, user):
    access = unique("access")
    connection = make_connection(user, make_provider(), access, expires_at=timezone.now() + timedelta(hours=1))
    assert fresh_access_token(connection) == access
    assert ThirdPartyConnection.objects.get(pk=connection.pk).last_used_at is not None
    assert audit_events() == []


@pytest.mark.parametrize("expired", [False, True], ids=["access-token", "refresh-token"])
def test_an_undecryptable_connection_is_deleted_and_audited(settings, key, user, expired):
    provider = make_provider()
    expires_at = timezone.now() + (timedelta(hours=-1) if expired else timedelta(hours=1))
    connection = make_connection(user, provider, unique("access"), unique("refresh"), expires_at=expires_at)
    use_keys(settings, new_key())  # the key that encrypted the tokens is gone

    assert fresh_access_token(connection) is None
    assert not ThirdPartyConnection.objects.filter(pk=connection.pk).exists()
    [event] = audit_events()
    assert event.user == user
    assert event.detail == {"provider": "acme", "reason": "undecryptable", "by": None}


def test_an_expired_connection_without_refresh_token_is_dropped(key, user):
    connection = make_connection(user, make_provider(), "at", "", expires_at=timezone.now() - timedelta(minutes=1))
    assert fresh_access_token(connection) is None
    assert ThirdPartyConnection.objects.count() == 0
    assert [e.detail["reason"] for e in audit_events()] == ["expired"]


def test_revoking_an_undecryptable_connection_still_deletes_it(settings, key, user):
    provider = make_provider(revocation_endpoint=f"http://127.0.0.1:{free_port()}/revoke", secret="client-secret")
    connection = make_connection(user, provider, unique("access"), unique("refresh"))
    use_keys(settings, new_key())
    revoke_connection(ThirdPartyConnection.objects.get(pk=connection.pk), reason="test")
    assert ThirdPartyConnection.objects.count() == 0
    assert [e.detail for e in audit_events()] == [{"provider": "acme", "reason": "test", "by": None}]


# --------------------------------------------------------------------------------------------
# 5. admin
# --------------------------------------------------------------------------------------------


def admin_url(model, view="changelist", *args):
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def act(client, model, action, objects):
    return client.post(
        admin_url(model), {"action": action, "_selected_action": [str(o.pk) for o in objects], "index": 0}, follow=True
    )


def messages_of(response):
    return [(m.level, str(m)) for m in response.context["messages"]]


def provider_form(**overrides):
    data = {
        "name": "Acme",
        "slug": "acme",
        "enabled": "on",
        "issuer": "https://acme.example.com",
        "authorization_endpoint": "https://acme.example.com/authorize",
        "token_endpoint": "https://acme.example.com/token",
        "revocation_endpoint": "",
        "userinfo_endpoint": "",
        "client_id": "site-at-acme",
        "new_client_secret": "",
        "token_endpoint_auth_method": "client_secret_basic",
        "use_pkce": "on",
        "scopes": "read",
        "resource": "",
        "_save": "Save",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def stocked(key, user):
    """A provider with a client secret, a connection, a stored secret and URL/form elicitations."""
    values = {
        "client_secret": unique("client-secret"),
        "access": unique("access"),
        "refresh": unique("refresh"),
        "stored": unique("sk"),
    }
    provider = make_provider(secret=values["client_secret"])
    connection = make_connection(user, provider, values["access"], values["refresh"], account_label="alice@acme")
    secret = make_secret(user, "openai_key", values["stored"])
    connect = Elicitation.objects.create(
        mode="url", kind="connect", message="Connect your Acme account", provider=provider, scopes="read", user=user
    )
    asked = Elicitation.objects.create(
        mode="url",
        kind="secret",
        message="Enter your key",
        secret_name="openai_key",
        user=user,
        status="completed",
        completed_at=timezone.now(),
    )
    ciphertexts = [
        raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted"),
        *raw(ThirdPartyConnection, connection.pk, "access_token_encrypted", "refresh_token_encrypted"),
        raw(StoredSecret, secret.pk, "value_encrypted"),
    ]
    return {
        "provider": provider,
        "connection": connection,
        "secret": secret,
        "elicitations": [connect, asked],
        "plaintexts": list(values.values()),
        "ciphertexts": ciphertexts,
    }


def test_admin_pages_render_and_never_show_a_secret(admin_client, stocked):
    pages = [
        admin_url(ThirdPartyConnection),
        admin_url(ThirdPartyConnection) + "?q=alice",
        admin_url(ThirdPartyConnection) + f"?provider__id__exact={stocked['provider'].pk}",
        admin_url(ThirdPartyConnection, "change", stocked["connection"].pk),
        admin_url(ThirdPartyConnection, "delete", stocked["connection"].pk),
        admin_url(ThirdPartyProvider),
        admin_url(ThirdPartyProvider) + "?q=acme",
        admin_url(ThirdPartyProvider, "change", stocked["provider"].pk),
        admin_url(ThirdPartyProvider, "add"),
        admin_url(StoredSecret),
        admin_url(StoredSecret) + "?q=openai",
        admin_url(StoredSecret, "change", stocked["secret"].pk),
        admin_url(Elicitation),
        admin_url(Elicitation) + "?kind__exact=connect",
        *[admin_url(Elicitation, "change", e.pk) for e in stocked["elicitations"]],
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        for value in stocked["plaintexts"] + stocked["ciphertexts"]:
            assert value not in html, (page, value)
        assert "gAAAAA" not in html, page
    # The pages do show what they are about.
    html = admin_client.get(admin_url(ThirdPartyConnection)).content.decode()
    assert "alice@acme" in html and "Acme" in html
    html = admin_client.get(admin_url(StoredSecret)).content.decode()
    assert "openai_key" in html


def test_provider_list_shows_whether_a_secret_is_stored(admin_client, key):
    make_provider("acme", secret="s" * 20)
    make_provider("bare", secret="")
    response = admin_client.get(admin_url(ThirdPartyProvider))
    rows = {p.slug: p for p in response.context["cl"].result_list}
    admin = response.context["cl"].model_admin
    assert (admin.has_client_secret(rows["acme"]), admin.has_client_secret(rows["bare"])) == (True, False)


def test_provider_client_secret_is_write_only(admin_client, key):
    response = admin_client.get(admin_url(ThirdPartyProvider, "add"))
    field = response.context["adminform"].form.fields["new_client_secret"]
    assert isinstance(field.widget, PasswordInput) and field.widget.render_value is False
    assert field.required is False
    html = response.content.decode()
    assert 'type="password" name="new_client_secret"' in html
    assert "(saved providers only)" in html

    secret = unique("client-secret")
    response = admin_client.post(admin_url(ThirdPartyProvider, "add"), provider_form(new_client_secret=secret))
    assert response.status_code == 302
    provider = ThirdPartyProvider.objects.get(slug="acme")
    stored = raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    assert stored.startswith("gAAAAA") and secret not in stored
    assert provider.client_secret == secret

    change = admin_url(ThirdPartyProvider, "change", provider.pk)
    html = admin_client.get(change).content.decode()
    assert secret not in html and stored not in html
    assert 'name="new_client_secret"' in html and 'name="new_client_secret" value=' not in html
    assert "http://testserver/elicitation/callback/acme/" in html  # the redirect URI to register

    # Blank: the stored secret is kept, byte for byte.
    assert admin_client.post(change, provider_form(name="Acme Corp")).status_code == 302
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted", "name") == (stored, "Acme Corp")

    # A new one replaces it.
    replacement = unique("replacement")
    assert admin_client.post(change, provider_form(new_client_secret=replacement)).status_code == 302
    assert ThirdPartyProvider.objects.get(pk=provider.pk).client_secret == replacement

    # "remove" clears it.
    assert admin_client.post(change, provider_form(clear_client_secret="on")).status_code == 302
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted") == ""
    assert ThirdPartyProvider.objects.get(pk=provider.pk).client_secret == ""


def test_provider_secret_needs_keys_but_removing_it_does_not(admin_client, settings, key):
    provider = make_provider(secret="old-secret-value")
    use_keys(settings)
    change = admin_url(ThirdPartyProvider, "change", provider.pk)
    response = admin_client.post(change, provider_form(new_client_secret="a-new-secret-value"))
    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == [
        'Set ELICITATION["ENCRYPTION_KEYS"] before storing a client secret.'
    ]
    stored = raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    assert stored.startswith("gAAAAA")
    # Removing an (undecryptable) secret needs no key.
    assert admin_client.post(change, provider_form(clear_client_secret="on")).status_code == 302
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted") == ""


def test_provider_form_validates_endpoints(admin_client, key):
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"),
        provider_form(authorization_endpoint="http://acme.example.com/authorize", token_endpoint=""),
    )
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors["authorization_endpoint"] == ["Use an https URL (http only on a loopback host)."]
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"), provider_form(issuer="", authorization_endpoint="", token_endpoint="")
    )
    assert response.context["adminform"].form.non_field_errors() == [
        "An enabled provider needs its authorization and token endpoints (or discover them from the issuer)."
    ]
    # only an issuer: the endpoints are discovered on save; an unreachable issuer is a form error
    port = free_port()  # nothing listens there
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"),
        provider_form(issuer=f"http://127.0.0.1:{port}", authorization_endpoint="", token_endpoint=""),
    )
    assert response.context["adminform"].form.non_field_errors()[0] == (
        "Could not discover the endpoints from the issuer: network_error: "
        f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server unreachable (ConnectionError)"
    )
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"), provider_form(token_endpoint_auth_method="none", use_pkce=None)
    )
    assert response.context["adminform"].form.non_field_errors() == ["A public client must use PKCE."]
    assert ThirdPartyProvider.objects.count() == 0


def test_connections_cannot_be_added_or_edited(admin_client, stocked):
    connection = stocked["connection"]
    assert admin_client.get(admin_url(ThirdPartyConnection, "add")).status_code == 403
    assert admin_client.post(admin_url(ThirdPartyConnection, "add"), {"scopes": "x"}).status_code == 403
    change = admin_url(ThirdPartyConnection, "change", connection.pk)
    response = admin_client.get(change)
    assert response.status_code == 200
    assert not response.context["has_change_permission"] and 'name="_save"' not in response.content.decode()
    assert admin_client.post(change, {"account_label": "mallory", "scopes": "admin"}).status_code == 403
    assert raw(ThirdPartyConnection, connection.pk, "account_label", "scopes") == ("alice@acme", "read")
    # Stored secrets and elicitations are not editable either.
    assert admin_client.get(admin_url(StoredSecret, "add")).status_code == 403
    assert admin_client.get(admin_url(Elicitation, "add")).status_code == 403
    assert admin_client.post(admin_url(StoredSecret, "change", stocked["secret"].pk), {"name": "x"}).status_code == 403


def test_connection_actions_offer_revoke_but_not_bulk_delete(admin_client, stocked):
    response = admin_client.get(admin_url(ThirdPartyConnection))
    blank, *actions = response.context["action_form"].fields["action"].choices
    assert blank[0] == ""  # Django's empty choice ("---------"; "- Select an option -" from Django 6.1)
    assert actions == [("revoke_connections", "Revoke the selected connections")]
    response = act(admin_client, ThirdPartyConnection, "delete_selected", [stocked["connection"]])
    assert ThirdPartyConnection.objects.filter(pk=stocked["connection"].pk).exists()
    assert audit_events() == []


def test_revoke_action_deletes_and_audits(admin_client, admin_user, stocked, other_user):
    kept = make_connection(other_user, stocked["provider"], "other-token")
    response = act(admin_client, ThirdPartyConnection, "revoke_connections", [stocked["connection"]])
    assert response.status_code == 200
    assert messages_of(response) == [(message_levels.SUCCESS, "1 connection(s) revoked.")]
    assert list(ThirdPartyConnection.objects.values_list("pk", flat=True)) == [kept.pk]
    [event] = audit_events()
    assert event.user_id == stocked["connection"].user_id
    assert event.detail == {"provider": "acme", "reason": "revoked in the admin", "by": admin_user.pk}


def test_deleting_one_connection_revokes_it(admin_client, admin_user, stocked):
    connection = stocked["connection"]
    response = admin_client.post(admin_url(ThirdPartyConnection, "delete", connection.pk), {"post": "yes"})
    assert response.status_code == 302
    assert ThirdPartyConnection.objects.count() == 0
    assert [e.detail for e in audit_events()] == [
        {"provider": "acme", "reason": "revoked in the admin", "by": admin_user.pk}
    ]


def test_stored_secret_can_be_deleted(admin_client, stocked):
    secret = stocked["secret"]
    response = admin_client.post(admin_url(StoredSecret, "delete", secret.pk), {"post": "yes"})
    assert response.status_code == 302
    assert StoredSecret.objects.count() == 0


def test_discover_action_reports_an_unreachable_issuer(admin_client, key):
    port = free_port()  # nothing listens there
    provider = make_provider(
        issuer=f"http://127.0.0.1:{port}", authorization_endpoint="", token_endpoint="", enabled=False
    )
    before = ThirdPartyProvider.objects.filter(pk=provider.pk).values().get()
    response = act(admin_client, ThirdPartyProvider, "discover_endpoints", [provider])
    assert messages_of(response) == [
        (
            message_levels.ERROR,
            f"Acme: network_error: http://127.0.0.1:{port}/.well-known/oauth-authorization-server unreachable (ConnectionError)",
        )
    ]
    assert ThirdPartyProvider.objects.filter(pk=provider.pk).values().get() == before


def test_discover_action_without_issuer(admin_client, key):
    provider = make_provider(issuer="")
    response = act(admin_client, ThirdPartyProvider, "discover_endpoints", [provider])
    assert messages_of(response) == [
        (message_levels.ERROR, "Acme: invalid_request: the provider has no issuer to discover")
    ]


# --- against a live instance of this project as the third party ------------------------------


@pytest.fixture
def live(settings, transactional_db):
    """This project on a loopback port; its issuer is its base URL."""
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield base


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_discover_action_fills_endpoints_from_live_metadata(admin_client, key, live):
    port = live.rsplit(":", 1)[1]
    good = make_provider(
        "good",
        issuer=live,
        authorization_endpoint="",
        token_endpoint="",
        userinfo_endpoint="https://accounts.example.com/me",
        enabled=False,
    )
    mismatch = make_provider(
        "mismatch", issuer=f"http://localhost:{port}", authorization_endpoint="", token_endpoint="", enabled=False
    )
    tenant = make_provider(
        "tenant", issuer=f"{live}/tenant", authorization_endpoint="", token_endpoint="", enabled=False
    )
    untouched = {p.pk: ThirdPartyProvider.objects.filter(pk=p.pk).values().get() for p in (mismatch, tenant)}

    response = act(admin_client, ThirdPartyProvider, "discover_endpoints", [good, mismatch, tenant])
    assert sorted(messages_of(response)) == sorted(
        [
            (message_levels.SUCCESS, "Good: endpoints updated"),
            (
                message_levels.ERROR,
                "Mismatch: invalid_response: the metadata issuer differs from the configured issuer (RFC 8414 §3.3)",
            ),
            (
                message_levels.ERROR,
                f"Tenant: invalid_response: {live}/.well-known/oauth-authorization-server/tenant did not answer with a metadata document",
            ),
        ]
    )
    good.refresh_from_db()
    assert (good.authorization_endpoint, good.token_endpoint, good.revocation_endpoint) == (
        f"{live}/oauth/authorize",
        f"{live}/oauth/token",
        f"{live}/oauth/revoke",
    )
    assert good.iss_parameter_supported is True
    assert good.userinfo_endpoint == "https://accounts.example.com/me"  # RFC 8414 has none: kept
    for pk, values in untouched.items():
        assert ThirdPartyProvider.objects.filter(pk=pk).values().get() == values


def mint_pair(application, user):
    """A DOT access token and an (unrelated) refresh token issued by the live site; raw values."""
    expires = timezone.now() + timedelta(hours=1)
    access = AccessToken(user=user, application=application, scope="profile", expires=expires)
    raw_access = secrets.token_urlsafe(32)
    set_token_value(access, raw_access)
    access.save()
    paired = AccessToken(user=user, application=application, scope="profile", expires=expires)
    set_token_value(paired, secrets.token_urlsafe(32))
    paired.save()
    refresh = RefreshToken(user=user, application=application, access_token=paired)
    raw_refresh = secrets.token_urlsafe(32)
    set_token_value(refresh, raw_refresh)
    refresh.save()
    return raw_access, raw_refresh, access.pk, paired.pk, refresh.pk


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("right_secret", "how"),
    [(True, "action"), (True, "delete-page"), (False, "action")],
    ids=["action-revoked-at-provider", "delete-page-revoked-at-provider", "action-provider-refuses"],
)
def test_revoking_in_the_admin_revokes_the_tokens_at_the_provider(
    admin_client, admin_user, key, live, user, right_secret, how
):
    client_secret = "s" + secrets.token_urlsafe(24)  # never starts with "-" (argparse would read an option)
    call_command(
        "ensure_oauth_client",
        client_id="site-client",
        client_secret=client_secret,
        redirect_uri=[f"{live}/elicitation/callback/live/"],
        stdout=io.StringIO(),
    )
    application = Application.objects.get(client_id="site-client")
    provider = make_provider(
        "live",
        client_id="site-client",
        secret=client_secret if right_secret else "wrong-" + client_secret,
        issuer=live,
        authorization_endpoint=f"{live}/oauth/authorize",
        token_endpoint=f"{live}/oauth/token",
        revocation_endpoint=f"{live}/oauth/revoke",
    )
    raw_access, raw_refresh, access_pk, paired_pk, refresh_pk = mint_pair(application, user)
    connection = make_connection(user, provider, raw_access, raw_refresh)

    if how == "action":
        response = act(admin_client, ThirdPartyConnection, "revoke_connections", [connection])
        assert messages_of(response) == [(message_levels.SUCCESS, "1 connection(s) revoked.")]
    else:
        response = admin_client.post(admin_url(ThirdPartyConnection, "delete", connection.pk), {"post": "yes"})
        assert response.status_code == 302
    assert ThirdPartyConnection.objects.count() == 0  # deleted locally either way (best effort at the provider)
    assert [e.detail for e in audit_events()] == [
        {"provider": "live", "reason": "revoked in the admin", "by": admin_user.pk}
    ]
    refresh = RefreshToken.objects.get(pk=refresh_pk)
    if right_secret:
        assert not AccessToken.objects.filter(pk__in=[access_pk, paired_pk]).exists()
        assert refresh.revoked is not None
    else:
        assert AccessToken.objects.filter(pk__in=[access_pk, paired_pk]).count() == 2
        assert refresh.revoked is None


# --- model validation ------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# 6. system checks
# --------------------------------------------------------------------------------------------


def elicitation_messages(**kwargs):
    return sorted(
        ((m.id, m.msg) for m in run_checks(**kwargs) if m.id and m.id.startswith("elicitation.")),
        key=lambda item: item[0],
    )


def test_valid_keys_pass_the_checks(settings):
    use_keys(settings, new_key(), new_key())
    assert elicitation_messages() == []
    assert checks.check_encryption_keys() == []
    assert checks.check_urls() == []


def test_empty_keys_warn(settings):
    use_keys(settings)
    [warning] = checks.check_encryption_keys()
    assert warning.id == "elicitation.W001"
    assert warning.is_serious() is False  # a warning: the site runs, nothing can be stored
    assert "Fernet.generate_key()" in warning.hint
    assert elicitation_messages() == [("elicitation.W001", warning.msg)]


def test_a_malformed_key_is_an_error(settings):
    use_keys(settings, new_key(), "not-a-fernet-key", b"also bad")
    assert elicitation_messages() == [
        ("elicitation.E002", 'ELICITATION["ENCRYPTION_KEYS"][1] is not a Fernet key (32 bytes, urlsafe base64).'),
        ("elicitation.E002", 'ELICITATION["ENCRYPTION_KEYS"][2] is not a Fernet key (32 bytes, urlsafe base64).'),
    ]
    assert all(m.is_serious() for m in checks.check_encryption_keys())


@pytest.mark.parametrize("as_bytes", [False, True])
def test_a_key_equal_to_secret_key_is_an_error(settings, as_bytes):
    shared = new_key()
    settings.SECRET_KEY = shared
    use_keys(settings, new_key(), shared.encode() if as_bytes else shared)
    assert elicitation_messages() == [
        ("elicitation.E003", 'ELICITATION["ENCRYPTION_KEYS"][1] is SECRET_KEY; use an independent key.')
    ]


def test_unrouted_pages_are_an_error(settings, key):
    settings.ROOT_URLCONF = __name__
    [error] = checks.check_urls()
    assert error.id == "elicitation.E004"
    assert error.hint == 'Add path("elicitation/", include("elicitation.urls")) to your ROOT_URLCONF.'
    assert ("elicitation.E004", error.msg) in elicitation_messages()
    settings.ROOT_URLCONF = "tests.support.urls"  # includes project.urls, hence the elicitation pages
    assert checks.check_urls() == []


# --------------------------------------------------------------------------------------------
# 7. management commands
# --------------------------------------------------------------------------------------------


def test_ensure_oauth_client_creates_a_hashed_confidential_client():
    secret = "a-client-secret-of-32-characters"
    out = io.StringIO()
    call_command(
        "ensure_oauth_client",
        client_id="other-site",
        client_secret=secret,
        redirect_uri=["https://other.example.com/elicitation/callback/demo/"],
        stdout=out,
    )
    assert out.getvalue() == "OAuth client 'other-site' ready (https://other.example.com/elicitation/callback/demo/).\n"
    app = Application.objects.get(client_id="other-site")
    assert app.client_type == Application.CLIENT_CONFIDENTIAL
    assert app.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE
    assert app.redirect_uris == "https://other.example.com/elicitation/callback/demo/"
    assert app.name == "Demo third-party connection"
    assert app.hash_client_secret is True and app.skip_authorization is False
    assert app.registration_source == "manual"  # never pruned as an unused dynamic client
    assert app.client_secret != secret and secret not in app.client_secret
    assert check_password(secret, app.client_secret) is True
    assert check_password("another-secret-entirely", app.client_secret) is False

    # Twice: the same row is updated (new secret, new redirect URIs), not duplicated.
    second = "a-second-secret-of-32-characters"
    call_command(
        "ensure_oauth_client",
        "--redirect-uri",
        "https://other.example.com/cb1",
        "--redirect-uri",
        "https://other.example.com/cb2",
        client_id="other-site",
        client_secret=second,
        name="Renamed",
        stdout=io.StringIO(),
    )
    assert Application.objects.filter(client_id="other-site").count() == 1
    app = Application.objects.get(client_id="other-site")
    assert (app.name, app.redirect_uris) == ("Renamed", "https://other.example.com/cb1 https://other.example.com/cb2")
    assert check_password(second, app.client_secret) is True
    assert check_password(secret, app.client_secret) is False


def test_ensure_oauth_client_refuses_a_short_secret():
    with pytest.raises(CommandError, match="^--client-secret must have at least 16 characters$"):
        call_command(
            "ensure_oauth_client",
            client_id="x",
            client_secret="fifteen-chars!!",
            redirect_uri=["https://x.example.com/cb"],
        )
    assert not Application.objects.filter(client_id="x").exists()
    call_command(
        "ensure_oauth_client",
        client_id="x",
        client_secret="sixteen-chars!!!",
        redirect_uri=["https://x.example.com/cb"],
        stdout=io.StringIO(),
    )
    assert Application.objects.filter(client_id="x").count() == 1


SITE = "https://site.example.com"


@pytest.fixture
def site(settings, key):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": SITE}
    return SITE


def test_ensure_demo_provider_makes_this_site_its_own_provider(site):
    out = io.StringIO()
    call_command("ensure_demo_provider", stdout=out)
    provider = ThirdPartyProvider.objects.get(slug="demo")
    assert provider.name == "Demo provider (this site)"
    assert (
        provider.issuer,
        provider.authorization_endpoint,
        provider.token_endpoint,
        provider.revocation_endpoint,
        provider.userinfo_endpoint,
        provider.resource,
    ) == (
        SITE,
        f"{SITE}/oauth/authorize",
        f"{SITE}/oauth/token",
        f"{SITE}/oauth/revoke",
        f"{SITE}/api/profile",
        f"{SITE}/api",
    )
    assert (
        provider.scopes,
        provider.iss_parameter_supported,
        provider.use_pkce,
        provider.enabled,
        provider.token_endpoint_auth_method,
        provider.client_id,
    ) == ("profile", True, True, True, "client_secret_basic", "demo-provider-client")
    assert out.getvalue().endswith(
        f"Third-party provider 'demo' -> {SITE} (redirect URI {SITE}/elicitation/callback/demo/).\n"
    )

    # The client secret is stored encrypted, and it is the DOT client's secret on this site.
    plain = provider.client_secret
    assert len(plain) >= 32
    assert plain not in raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    app = Application.objects.get(client_id="demo-provider-client")
    assert check_password(plain, app.client_secret) is True
    assert (app.client_type, app.authorization_grant_type, app.redirect_uris, app.name) == (
        "confidential",
        "authorization-code",
        f"{SITE}/elicitation/callback/demo/",
        "Demo provider connection",
    )
    resource = ProtectedResource.objects.get(uri=f"{SITE}/api")
    assert (resource.name, resource.scopes, resource.enabled) == ("Reference site API", "profile", True)

    # Again: same rows, a new secret on both sides.
    call_command("ensure_demo_provider", stdout=io.StringIO())
    assert ThirdPartyProvider.objects.filter(slug="demo").count() == 1
    assert Application.objects.filter(client_id="demo-provider-client").count() == 1
    assert ProtectedResource.objects.filter(uri=f"{SITE}/api").count() == 1
    second = ThirdPartyProvider.objects.get(slug="demo").client_secret
    assert second != plain
    assert check_password(second, Application.objects.get(client_id="demo-provider-client").client_secret) is True


def test_ensure_demo_provider_for_another_instance(site):
    call_command(
        "ensure_demo_provider",
        "--issuer",
        "https://other.example.org/",
        "--client-id",
        "c-1",
        "--client-secret",
        "s" * 20,
        "--slug",
        "remote",
        stdout=io.StringIO(),
    )
    provider = ThirdPartyProvider.objects.get(slug="remote")
    assert (
        provider.name,
        provider.issuer,
        provider.token_endpoint,
        provider.resource,
        provider.client_id,
        provider.client_secret,
    ) == (
        "Demo provider (https://other.example.org)",
        "https://other.example.org",
        "https://other.example.org/oauth/token",
        "https://other.example.org/api",
        "c-1",
        "s" * 20,
    )
    assert not Application.objects.exists()  # no client on this site for another instance


@pytest.mark.parametrize("given", [[], ["--client-id", "c"], ["--client-secret", "s" * 20]])
def test_ensure_demo_provider_with_issuer_needs_client_credentials(site, given):
    with pytest.raises(CommandError, match="^--client-id and --client-secret are required with --issuer$"):
        call_command("ensure_demo_provider", "--issuer", "https://other.example.org", *given)
    assert not ThirdPartyProvider.objects.exists()


def test_ensure_demo_provider_needs_keys(settings, site):
    use_keys(settings)
    with pytest.raises(CommandError, match=r'^Set ELICITATION\["ENCRYPTION_KEYS"\] first'):
        call_command("ensure_demo_provider")
    assert not ThirdPartyProvider.objects.exists() and not Application.objects.exists()


def test_ensure_demo_provider_refuses_an_unusable_base_url_before_creating_anything(settings, key):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": "http://mcp.example.com"}  # http, not loopback
    with pytest.raises(CommandError) as excinfo:
        call_command("ensure_demo_provider")
    assert str(excinfo.value).startswith("the provider would not be valid (issuer: ")
    assert "Use an https URL (http only on a loopback host)." in str(excinfo.value)
    assert not ThirdPartyProvider.objects.exists()
    assert not Application.objects.exists()


def test_ensure_demo_provider_discovery_failure_is_a_command_error(site):
    port = free_port()
    with pytest.raises(
        CommandError,
        match=rf"^discovery failed: network_error: http://127.0.0.1:{port}/\.well-known/oauth-authorization-server unreachable",
    ):
        call_command(
            "ensure_demo_provider",
            "--issuer",
            f"http://127.0.0.1:{port}",
            "--client-id",
            "c",
            "--client-secret",
            "s" * 20,
            "--discover",
            stdout=io.StringIO(),
        )


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_saving_a_provider_with_only_its_issuer_discovers_the_endpoints(admin_client, key, live):
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"),
        provider_form(issuer=live, authorization_endpoint="", token_endpoint="", new_client_secret="s" * 32),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    provider = ThirdPartyProvider.objects.get(slug="acme")
    assert (provider.authorization_endpoint, provider.token_endpoint, provider.revocation_endpoint) == (
        f"{live}/oauth/authorize",
        f"{live}/oauth/token",
        f"{live}/oauth/revoke",
    )
    assert provider.iss_parameter_supported is True
    assert provider.client_secret == "s" * 32
