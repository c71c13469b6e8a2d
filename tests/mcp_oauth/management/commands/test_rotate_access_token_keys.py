"""The ``rotate_access_token_keys`` management command: rotate, list, re-encrypt."""

from __future__ import annotations

import pytest

from mcp_oauth.models import AccessTokenSigningKey
from tests.support.jwt_access_tokens import jwt_resource  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def test_the_command_rotates_lists_and_prunes(jwt_resource):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("rotate_access_token_keys", "--alg", "RS256", "--publish-seconds", "0", stdout=out)
    assert "created RS256 key" in out.getvalue() and "retires at" in out.getvalue()
    assert AccessTokenSigningKey.objects.count() == 2
    listing = StringIO()
    call_command("rotate_access_token_keys", "--list", stdout=listing)
    assert listing.getvalue().count("published") == 2
    assert AccessTokenSigningKey.objects.signing().alg == "RS256"
    out = StringIO()
    call_command("rotate_access_token_keys", "--reencrypt", stdout=out)
    assert out.getvalue().strip() == "re-encrypted 2 keys"
