"""manage.py erase_user_data (mcp_oauth.management.commands.erase_user_data)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.mcp_oauth.authorization_server.user_data.test_erasure import revocation  # noqa: F401 - fixtures
from tests.support.lifecycle_helpers import leftovers, populate

pytestmark = pytest.mark.django_db


def test_erase_command(user, other_user, resource, public_app, revocation, django_capture_on_commit_callbacks):
    state = populate(user, other_user, public_app, resource, revocation.url)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("erase_user_data", "alice", "--yes")
    assert leftovers(user.pk, state) == {}
    with pytest.raises(CommandError, match="No user"):
        call_command("erase_user_data", "nobody", "--yes")
