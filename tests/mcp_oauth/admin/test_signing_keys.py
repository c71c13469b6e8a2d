"""The admin screen of the JWT access-token signing keys (``mcp_oauth.admin.signing_keys``): each key's
state, read-only but for ``retire_at`` (a compromised key retired at once, its tokens refused), no
key added by hand, the private key never shown."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from mcp_oauth.admin.signing_keys import AccessTokenSigningKeyAdmin
from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.models import AccessTokenSigningKey
from tests.mcp_oauth.admin.test_admin import admin, url  # noqa: F401 - fixtures and helpers
from tests.support.jwt_access_tokens import jwt_resource, logged_in  # noqa: F401 - fixtures
from tests.support.oauth_helpers import bearer_status, bearer_works, first_pair

pytestmark = pytest.mark.django_db


def test_the_state_follows_the_schedule():
    now = timezone.now()
    screen = AccessTokenSigningKeyAdmin(AccessTokenSigningKey, None)
    signing = AccessTokenSigningKey(kid="a", signs_from=now - timedelta(minutes=1))
    upcoming = AccessTokenSigningKey(kid="b", signs_from=now + timedelta(minutes=10))
    retiring = AccessTokenSigningKey(kid="c", signs_from=now - timedelta(days=1), retire_at=now + timedelta(hours=1))
    retired = AccessTokenSigningKey(kid="d", signs_from=now - timedelta(days=1), retire_at=now - timedelta(seconds=1))
    assert [screen.state(key) for key in (signing, upcoming, retiring, retired)] == [
        "published",
        "published, not signing yet",
        "published",
        "retired",
    ]


def test_the_list_shows_each_key_and_no_key_is_added_by_hand(admin):
    first = signing_keys.rotate()[0]
    second = signing_keys.rotate(publish_seconds=600)[0]
    page = admin.get(url(AccessTokenSigningKey)).content.decode()
    assert first.kid in page and second.kid in page
    assert "published, not signing yet" in page
    assert admin.get(url(AccessTokenSigningKey, "add")).status_code == 403


def test_the_change_page_never_shows_the_private_key(admin):
    key = signing_keys.rotate()[0]
    page = admin.get(url(AccessTokenSigningKey, "change", key.pk)).content.decode()
    assert key.kid in page
    assert key.private_key not in page and "PRIVATE KEY" not in page and 'name="private_key"' not in page
    assert 'name="retire_at_0"' in page  # the one editable field
    assert 'name="kid"' not in page and 'name="signs_from_0"' not in page


def test_retiring_a_key_in_the_admin_refuses_its_tokens(admin_user, logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)
    key = AccessTokenSigningKey.objects.get()
    staff = Client()
    staff.force_login(admin_user)
    now = timezone.localtime(timezone.now() - timedelta(seconds=1))  # the form's fields are in local time
    response = staff.post(
        url(AccessTokenSigningKey, "change", key.pk),
        {"retire_at_0": now.strftime("%Y-%m-%d"), "retire_at_1": now.strftime("%H:%M:%S")},
    )
    assert response.status_code == 302, response.content
    key.refresh_from_db()
    assert key.retire_at is not None and key.retire_at <= timezone.now()
    assert bearer_status(logged_in, token) == 401
