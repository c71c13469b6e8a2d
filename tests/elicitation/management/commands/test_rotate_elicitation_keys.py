"""``manage.py rotate_elicitation_keys``: every encrypted value re-encrypted under the newest key, undecryptable rows reported."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from elicitation.crypto import DecryptionError, decrypt, encrypt
from elicitation.models import (
    StoredSecret,
    ThirdPartyConnection,
    ThirdPartyProvider,
)
from tests.support.elicitation_keys import (
    make_connection,
    make_provider,
    make_secret,
    new_key,
    plaintexts,
    raw,
    snapshot,
    unique,
    use_keys,
)

pytestmark = pytest.mark.django_db


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
