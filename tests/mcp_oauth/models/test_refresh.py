"""Refresh-token generations (mcp_oauth.models.refresh): a generation has at most one successor,
and losing its parent leaves it standing."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, transaction

from mcp_oauth.models.refresh import RefreshGeneration

pytestmark = pytest.mark.django_db


def test_a_generation_has_at_most_one_successor():
    family = uuid.uuid4()
    first = RefreshGeneration.objects.create(token_family=family, scope="mcp")
    second = RefreshGeneration.objects.create(token_family=family, parent=first, scope="mcp")
    assert str(first) == f"generation {first.pk} of family {family}"
    assert first.successor == second and second.parent == first
    assert first.rotated_at is None
    with pytest.raises(IntegrityError), transaction.atomic():
        RefreshGeneration.objects.create(token_family=family, parent=first, scope="mcp")


def test_deleting_a_parent_keeps_its_successor():
    first = RefreshGeneration.objects.create(token_family=uuid.uuid4())
    second = RefreshGeneration.objects.create(token_family=first.token_family, parent=first)
    first.delete()
    second.refresh_from_db()
    assert second.parent is None
