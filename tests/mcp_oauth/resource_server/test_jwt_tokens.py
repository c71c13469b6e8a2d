"""JWT access tokens at the resource server (RFC 9068 §4): verified without a database query, once per
token, on the thread and the event-loop paths, through the decorator and the DRF class."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from mcp_oauth.models import ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from tests.support.jwt_access_tokens import RESOURCE, jwt_resource, logged_in, segments  # noqa: F401 - fixtures
from tests.support.oauth_helpers import bearer_status, bearer_works, first_pair

pytestmark = pytest.mark.django_db


def test_the_resource_server_reads_no_database(logged_in, jwt_resource, public_app, user):
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)  # warms the key ring, the client and the registry
    resource = ProtectedResource.objects.get(uri=RESOURCE)
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    with CaptureQueriesContext(connection) as queries:
        principal = authenticate_bearer(request, resource)
        assert principal.user.pk == user.pk
        assert principal.client_id == public_app.client_id
        assert principal.scopes == frozenset({"mcp"})
    assert [query["sql"] for query in queries.captured_queries] == []


@pytest.mark.urls("tests.support.urls")
def test_the_decorator_and_the_drf_class_accept_a_jwt(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    response = logged_in.get("/api/plain", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response.json() == {"user": "alice", "client": public_app.client_id}
    response = logged_in.get("/api/notes", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 403  # a valid token without the scope "profile"
    assert 'error="insufficient_scope"' in response["WWW-Authenticate"]
    head, body, signature = token.split(".")
    response = logged_in.get("/api/notes", HTTP_AUTHORIZATION=f"Bearer {head}.{body}.{signature[::-1]}")
    assert response.status_code == 401


def test_a_token_verified_once_is_not_verified_again_but_still_checked(logged_in, jwt_resource, public_app):
    from unittest import mock

    from mcp_oauth.resource_server import jwt_tokens

    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)
    with mock.patch.object(jwt_tokens, "verify_access_token", side_effect=AssertionError("verified again")):
        assert bearer_works(logged_in, token)
        other = ProtectedResource.objects.create(uri="http://testserver/other", scopes="mcp", jwt_access_tokens=True)
        request = RequestFactory().get("/other", HTTP_AUTHORIZATION=f"Bearer {token}")
        with pytest.raises(BearerChallenge) as refused:
            authenticate_bearer(request, ProtectedResource.objects.get(pk=other.pk))
    assert refused.value.error_description == "The access token was not issued for this resource."


def test_the_event_loop_path_accepts_a_jwt_and_defers_a_denied_one(logged_in, jwt_resource, public_app, settings):
    from asgiref.sync import async_to_sync

    from mcp_oauth.resource_server.authentication import authenticate_bearer_cached
    from mcp_oauth.resource_server.jwt_keys import deny

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REVOCATION_CHECK_SECONDS": 3600}
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)  # the thread path loaded the registry, the key ring and the client
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    with CaptureQueriesContext(connection) as queries:
        principal = async_to_sync(authenticate_bearer_cached)(request, RESOURCE)
    assert principal is not None and principal.client_id == public_app.client_id
    assert principal.access_token.claims["aud"] == RESOURCE
    assert queries.captured_queries == []
    deny([(hashlib.sha256(token.encode()).hexdigest(), segments(token)[1]["exp"])])
    assert async_to_sync(authenticate_bearer_cached)(request, RESOURCE) is None  # the thread path answers 401
    assert bearer_status(logged_in, token) == 401
