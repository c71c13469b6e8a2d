"""The revocation stamp (mcp_oauth.models.revocation): one row, pk 1, whose versions only grow."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.db.models import F

from mcp_oauth.models.revocation import STAMP_PK, RevocationStamp

pytestmark = pytest.mark.django_db


def test_the_one_row_starts_at_version_zero_and_counts_up():
    RevocationStamp.objects.filter(pk=STAMP_PK).delete()
    stamp = RevocationStamp.objects.create()
    assert (stamp.pk, stamp.version, stamp.config_version) == (1, 0, 0)
    assert str(stamp) == "revocation stamp 0"
    RevocationStamp.objects.filter(pk=STAMP_PK).update(version=F("version") + 1)
    RevocationStamp.objects.filter(pk=STAMP_PK).update(version=F("version") + 1, config_version=F("config_version") + 1)
    stamp.refresh_from_db()
    assert (stamp.version, stamp.config_version) == (2, 1)
    assert str(stamp) == "revocation stamp 2"


def test_there_is_never_a_second_row_with_the_default_key():
    RevocationStamp.objects.get_or_create(pk=STAMP_PK)
    with pytest.raises(IntegrityError), transaction.atomic():
        RevocationStamp.objects.create()
    assert RevocationStamp.objects.count() == 1
