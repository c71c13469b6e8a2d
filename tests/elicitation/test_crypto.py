"""The Fernet key list of the elicitation app (elicitation.crypto): round trips, one ciphertext per
call, wrong or tampered keys, the newest key encrypts and every key decrypts, rotation of one value,
the cache reset when the setting changes.

The rest of the old encryption-at-rest file lives with the module each test speaks for:
tests/elicitation/test_models.py, test_providers.py, test_admin.py, test_checks.py,
tests/elicitation/management/commands/test_rotate_elicitation_keys.py and the reference site's
commands in tests/project/management/commands/.
"""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from elicitation import crypto
from elicitation.crypto import DecryptionError, decrypt, encrypt, keys_configured, rotate
from tests.support.elicitation_keys import new_key, unique, use_keys

pytestmark = pytest.mark.django_db

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
