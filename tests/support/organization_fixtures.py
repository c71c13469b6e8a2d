"""Fixtures of organization tests: ``acme`` and ``globex``, two organizations the ``user`` fixture
belongs to (import them into a test module: ``from tests.support.organization_fixtures import acme``)."""

from __future__ import annotations

import pytest

from tests.support.organization_helpers import add_member, make_organization


@pytest.fixture
def acme(user):
    organization = make_organization("acme", "Acme Corp")
    add_member(user, organization)
    return organization


@pytest.fixture
def globex(user):
    organization = make_organization("globex", "Globex")
    add_member(user, organization)
    return organization
