"""Which organization an authorization request acts for (mcp_oauth.authorization_server.organizations.choice)."""

from __future__ import annotations

import pytest

from mcp_oauth.authorization_server.organizations.choice import (
    InvalidOrganizationChoice,
    chosen_organization,
    is_member,
    resource_organization,
    user_organizations,
)
from tests.support.organization_helpers import add_member, make_organization, organization_endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def orgs(user):
    acme, globex = make_organization("acme", "Acme"), make_organization("globex", "Globex")
    add_member(user, globex)
    add_member(user, acme, role="admin")
    return acme, globex


def test_user_organizations_by_name_active_only(user, orgs):
    dormant = make_organization("dormant", "Dormant", is_active=False)
    add_member(user, dormant)
    assert [o.slug for o in user_organizations(user)] == ["acme", "globex"]
    assert not is_member(user, dormant) and is_member(user, orgs[0])


def test_a_user_without_organizations(user, other_user, orgs):
    assert user_organizations(other_user) == []
    assert chosen_organization(other_user, []) is None
    assert chosen_organization(other_user, [""]) is None
    with pytest.raises(InvalidOrganizationChoice):
        chosen_organization(other_user, [str(orgs[0].pk)])


def test_the_choice(user, orgs):
    acme, _ = orgs
    assert chosen_organization(user, [str(acme.pk)]) == acme


@pytest.mark.parametrize("values", [[], [""], ["x"], ["1", "2"], ["0"], ["9" * 21], ["٣"], [" 1"]])
def test_bad_choices(user, orgs, values):
    with pytest.raises(InvalidOrganizationChoice):
        chosen_organization(user, values)


def test_an_organization_the_user_left(user, orgs):
    acme, _ = orgs
    acme.memberships.filter(user=user).delete()
    with pytest.raises(InvalidOrganizationChoice):
        chosen_organization(user, [str(acme.pk)])


def test_resource_organization(resource, orgs):
    assert resource_organization(resource) is None
    assert resource_organization(organization_endpoint(orgs[1])) == orgs[1]
