"""``mcp_oauth.resource_server.actors``: a token's RFC 8693 §4.1 ``act`` at the resource server, read
from what was loaded with the token (the token cache's subquery, a JWT's claims) without a query,
or with one query from its ``TokenActor`` row."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import TokenActor
from mcp_oauth.resource_server.actors import ACTOR_ATTRIBUTE, actor_subquery, token_actor
from tests.support.token_exchange_helpers import API_URI


def test_a_jwt_access_tokens_actor_comes_from_its_claims_without_a_query(db, django_assert_num_queries):
    from mcp_oauth.resource_server.actors import token_actor
    from mcp_oauth.resource_server.jwt_tokens import JWTAccessToken
    from mcp_oauth.shared.access_jwt import AccessTokenClaims

    claims = {"aud": API_URI, "exp": 2**31, "sub": "7", "client_id": "c", "act": {"sub": "c"}}
    verified = AccessTokenClaims(claims={**claims, "scope": "profile"}, kid="k")
    with django_assert_num_queries(0):
        assert token_actor(JWTAccessToken(verified, "0" * 64, application=None)) == {"sub": "c"}


@pytest.fixture
def tokens(user, public_app):
    AccessToken = get_access_token_model()
    expires = timezone.now() + timedelta(hours=1)
    delegated = AccessToken.objects.create(user=user, application=public_app, token="delegated", expires=expires)
    down = AccessToken.objects.create(user=user, application=public_app, token="down-scoped", expires=expires)
    plain = AccessToken.objects.create(user=user, application=public_app, token="plain", expires=expires)
    act = {"sub": "agent-7", "act": {"sub": "orchestrator"}}
    TokenActor.objects.create(token_checksum=delegated.token_checksum, act=act)
    TokenActor.objects.create(token_checksum=down.token_checksum, act=None)
    return delegated, down, plain


def test_the_subquery_loads_each_tokens_act_with_its_row(tokens, django_assert_num_queries):
    AccessToken = get_access_token_model()
    with django_assert_num_queries(1):
        rows = {row.token: row for row in AccessToken.objects.annotate(**{ACTOR_ATTRIBUTE: actor_subquery()})}
        actors = {value: token_actor(row) for value, row in rows.items()}
    assert actors == {
        "delegated": {"sub": "agent-7", "act": {"sub": "orchestrator"}},
        "down-scoped": None,
        "plain": None,
    }


def test_a_row_loaded_without_the_subquery_costs_one_query(tokens, django_assert_num_queries):
    delegated, _, plain = (get_access_token_model().objects.get(pk=token.pk) for token in tokens)
    with django_assert_num_queries(1):
        assert token_actor(delegated) == {"sub": "agent-7", "act": {"sub": "orchestrator"}}
    with django_assert_num_queries(1):
        assert token_actor(plain) is None


def test_no_token_no_actor_and_a_json_text_is_decoded(db, django_assert_num_queries):
    class Loaded:
        token_checksum = "0" * 64

    with django_assert_num_queries(0):
        assert token_actor(None) is None
        loaded = Loaded()
        loaded.__dict__[ACTOR_ATTRIBUTE] = '{"sub": "agent-7"}'  # a backend that does not decode the subquery
        assert token_actor(loaded) == {"sub": "agent-7"}
        loaded.__dict__[ACTOR_ATTRIBUTE] = '["not", "an", "object"]'
        assert token_actor(loaded) is None
