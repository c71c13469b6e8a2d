"""``AccessTokenSigningKey`` and its queryset: which keys are published and which one signs at a
given time, the unique ``kid``, ``__str__``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from mcp_oauth.models import AccessTokenSigningKey

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def key(kid: str, *, signs_in: int = 0, retires_in: int | None = None, alg: str = "ES256") -> AccessTokenSigningKey:
    return AccessTokenSigningKey.objects.create(
        kid=kid,
        alg=alg,
        public_jwk={"kty": "EC", "kid": kid},
        private_key="-",
        signs_from=NOW + timedelta(seconds=signs_in),
        retire_at=None if retires_in is None else NOW + timedelta(seconds=retires_in),
    )


def kids(queryset) -> set[str]:
    return set(queryset.values_list("kid", flat=True))


def test_published_keys_are_those_not_retired_yet():
    key("current")
    key("next", signs_in=600)
    key("retiring", signs_in=-7200, retires_in=60)
    key("retired", signs_in=-9000, retires_in=0)
    assert kids(AccessTokenSigningKey.objects.published(NOW)) == {"current", "next", "retiring"}
    assert kids(AccessTokenSigningKey.objects.published(NOW + timedelta(seconds=61))) == {"current", "next"}


def test_the_newest_key_whose_time_has_come_signs_alone():
    key("old", signs_in=-7200, retires_in=3600)
    key("current", signs_in=-60)
    key("next", signs_in=600)
    assert AccessTokenSigningKey.objects.signing(NOW).kid == "current"
    assert AccessTokenSigningKey.objects.signing(NOW + timedelta(seconds=600)).kid == "next"
    assert AccessTokenSigningKey.objects.signing(NOW - timedelta(seconds=3600)).kid == "old"


def test_a_retired_key_never_signs_and_no_key_means_none():
    assert AccessTokenSigningKey.objects.signing(NOW) is None
    key("retired", signs_in=-60, retires_in=0)
    assert AccessTokenSigningKey.objects.signing(NOW) is None
    assert AccessTokenSigningKey.objects.signing(NOW - timedelta(seconds=1)).kid == "retired"


def test_of_two_keys_signing_from_the_same_instant_the_later_row_signs():
    key("first")
    key("second")
    assert AccessTokenSigningKey.objects.signing(NOW).kid == "second"
    assert [k.kid for k in AccessTokenSigningKey.objects.all()] == ["second", "first"]


def test_kid_is_unique_and_str_names_alg_and_kid():
    made = key("abc", alg="RS256")
    assert str(made) == "RS256 abc"
    with pytest.raises(IntegrityError), transaction.atomic():
        key("abc")
    assert AccessTokenSigningKey.objects.count() == 1
