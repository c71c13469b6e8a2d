"""FleetSecret (mcp_oauth.models.fleet): one row per setting, its fingerprints as a JSON list."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from mcp_oauth.models import FleetSecret

pytestmark = pytest.mark.django_db


def test_one_row_per_setting_and_its_description():
    row = FleetSecret.objects.create(setting="SECRET_KEY", salt="ab" * 16, fingerprints=["0" * 64, "1" * 64])
    assert str(row) == "SECRET_KEY (2 keys)"
    assert FleetSecret.objects.get(pk=row.pk).fingerprints == ["0" * 64, "1" * 64]
    with pytest.raises(IntegrityError), transaction.atomic():
        FleetSecret.objects.create(setting="SECRET_KEY", salt="cd" * 16, fingerprints=[])
