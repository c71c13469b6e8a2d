"""The elicitation system checks: the Fernet key list (E001-E003, W001) and the routed pages (E004)."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.http import HttpResponse
from django.urls import path

from elicitation import checks
from tests.support.elicitation_keys import new_key, use_keys

pytestmark = pytest.mark.django_db


# A URLconf without the elicitation pages (``elicitation.E004``): ROOT_URLCONF = __name__.
def _nothing(request):
    return HttpResponse("ok")


urlpatterns = [path("", _nothing)]


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
