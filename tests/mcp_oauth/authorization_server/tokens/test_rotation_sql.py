"""The rotation's hand-written SQL (mcp_oauth.authorization_server.tokens.rotation_sql), statement
by statement on a real token pair: the presented row read with its user, access token and
generation; the claim won once; the members revoked and detached; unknown tokens read as None."""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone
from oauth2_provider.models import get_refresh_token_model

from mcp_oauth.authorization_server.tokens import rotation_sql
from mcp_oauth.models import RefreshGeneration
from tests.support.oauth_helpers import bearer_works, first_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(client, user, resource, public_app):
    client.force_login(user)
    return first_pair(client, public_app)


def test_the_presented_row_comes_with_its_user_access_token_and_generation(pair, user, django_assert_num_queries):
    with django_assert_num_queries(1):
        row = rotation_sql._presented_row(pair["refresh_token"])
        assert (row.user.pk, row.revoked) == (user.pk, None)
        assert row.access_token.pk is not None
        generation = row.mcp_generation.generation
    assert generation.rotated_at is None
    assert rotation_sql._presented_row("not-a-refresh-token") is None


def test_the_claim_is_won_once(pair):
    generation = RefreshGeneration.objects.get()
    now = timezone.now()
    assert rotation_sql._claim_rotation(generation.pk, now, DEFAULT_DB_ALIAS) is True
    assert rotation_sql._claim_rotation(generation.pk, now, DEFAULT_DB_ALIAS) is False
    generation.refresh_from_db()
    assert generation.rotated_at == now


def test_revoking_the_members_returns_their_ids_and_only_once(client, pair):
    generation = RefreshGeneration.objects.get()
    RefreshToken = get_refresh_token_model()
    live = set(RefreshToken.objects.filter(revoked__isnull=True).values_list("pk", flat=True))
    now = timezone.now()
    assert rotation_sql._revoke_members(generation.pk, now, DEFAULT_DB_ALIAS) == live
    assert rotation_sql._revoke_members(generation.pk, now, DEFAULT_DB_ALIAS) == set()
    assert set(RefreshToken.objects.filter(revoked=now).values_list("pk", flat=True)) == live
    assert bearer_works(client, pair["access_token"])  # the access token itself is deleted by the next statement
