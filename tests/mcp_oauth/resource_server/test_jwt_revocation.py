"""The deny-list of JWT access tokens: a revoked token (RFC 7009, disconnection, deletion, user gone,
refresh rotation) is refused although its signature still verifies; a cache outage falls back to
the database."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from tests.support.jwt_access_tokens import RESOURCE, jwt_resource, logged_in, segments  # noqa: F401 - fixtures
from tests.support.oauth_helpers import bearer_status, bearer_works, first_pair

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("how", ["rfc7009", "connected_apps", "admin_delete", "deactivate", "delete_user"])
def test_a_revoked_token_is_refused_through_the_deny_list(logged_in, jwt_resource, public_app, user, how):
    pair = first_pair(logged_in, public_app)
    token = pair["access_token"]
    assert bearer_works(logged_in, token)
    if how == "rfc7009":
        response = logged_in.post("/oauth/revoke", {"token": token, "client_id": public_app.client_id})
        assert response.status_code == 200
    elif how == "connected_apps":
        revoke_user_grants(user, public_app, reason="user_disconnected")
    elif how == "admin_delete":
        get_access_token_model().objects.all().delete()
    elif how == "deactivate":
        user.is_active = False
        user.save()
    else:
        user.delete()
    assert get_access_token_model().objects.filter(user_id=user.pk).count() in (0, 1)
    assert bearer_status(logged_in, token) == 401


def test_a_refresh_issues_a_new_jwt_and_denies_the_old_one(logged_in, jwt_resource, public_app):
    pair = first_pair(logged_in, public_app)
    old = pair["access_token"]
    response = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": pair["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 200, response.content
    new = response.json()["access_token"]
    assert segments(new)[0]["typ"] == "at+jwt" and segments(new)[1]["jti"] != segments(old)[1]["jti"]
    assert bearer_works(logged_in, new)
    assert bearer_status(logged_in, old) == 401  # the rotation deleted its row: denied


def test_a_cache_outage_degrades_to_the_database_for_a_jwt(logged_in, jwt_resource, public_app, settings):
    token = first_pair(logged_in, public_app)["access_token"]
    settings.CACHES = {
        **settings.CACHES,
        "down": {"BACKEND": "mcp_oauth.shared.redis_cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"},
    }
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE": "down"}
    resource = ProtectedResource.objects.get(uri=RESOURCE)
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert authenticate_bearer(request, resource).client_id == public_app.client_id
    get_access_token_model().objects.all().delete()  # revoked while the cache is away
    with pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(request, resource)
    assert refused.value.error_description == "The access token was revoked."
