"""Defined answers when a shared resource is away (mcp_oauth.shared.overload), in one process.

The pool-exhaustion and slow-database cases run against real worker processes on PostgreSQL in
tests/topology/test_production_topology.py.
"""

from __future__ import annotations

import pytest
from django.db import OperationalError
from django.test import Client

from mcp_oauth.shared.overload import is_unavailable_error, unavailable_response

pytestmark = pytest.mark.django_db(transaction=True)

DEAD_REDIS = {
    "default": {
        "BACKEND": "mcp_oauth.shared.redis_cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
        "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
    }
}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def test_redis_outage_degrades_the_token_cache_to_the_database(settings, resource, user, public_app, mint_token):
    pytest.importorskip("redis")
    token = mint_token(user, public_app, "mcp", resource.uri)
    settings.CACHES = DEAD_REDIS
    response = Client().post(
        "/mcp",
        INIT,
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content


def test_redis_outage_on_a_throttled_endpoint_is_503_with_retry_after(settings, resource):
    pytest.importorskip("redis")
    settings.CACHES = DEAD_REDIS
    response = Client().post("/oauth/token", {"grant_type": "client_credentials"})
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json() == {
        "error": "temporarily_unavailable",
        "error_description": "The service is overloaded; retry later.",
    }


def test_an_operational_error_in_a_view_is_503_not_500(settings, monkeypatch, resource):
    from mcp_oauth.authorization_server import metadata

    def broken(*args, **kwargs):
        raise OperationalError("connection pool exhausted")

    monkeypatch.setattr(metadata.ProtectedResource.objects, "get_by_uri", broken)
    response = Client(raise_request_exception=False).get("/.well-known/oauth-protected-resource/mcp")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"


def test_which_errors_count_as_unavailable():
    from django.db import IntegrityError

    assert is_unavailable_error(OperationalError("too many clients"))
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = OperationalError("pool timeout")
    assert is_unavailable_error(wrapped)
    assert not is_unavailable_error(IntegrityError("duplicate"))
    assert not is_unavailable_error(ValueError("bad input"))
    assert unavailable_response().status_code == 503


def test_the_overload_answer_of_a_cors_endpoint_carries_cors_headers(settings, resource):
    """A browser client reads the 503 and its Retry-After (not an opaque network error)."""
    pytest.importorskip("redis")
    settings.CACHES = DEAD_REDIS
    response = Client().post("/oauth/token", {"grant_type": "client_credentials"}, HTTP_ORIGIN="https://app.example")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response["Access-Control-Allow-Origin"] == "*"
    assert "Retry-After" in [h.strip() for h in response["Access-Control-Expose-Headers"].split(",")]


def test_the_overload_answer_of_the_mcp_endpoint_carries_cors_headers_for_an_allowed_origin(monkeypatch, resource):
    from mcp_oauth.mcp_server.transport import views
    from mcp_oauth.settings import mcp_oauth_settings

    def broken(*args, **kwargs):
        raise OperationalError("connection pool exhausted")

    monkeypatch.setattr(views, "resource_by_uri", broken)
    origin = mcp_oauth_settings.base_url
    response = Client(raise_request_exception=False).post(
        "/mcp",
        INIT,
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_ORIGIN=origin,
    )
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["error"] == "temporarily_unavailable"
    assert response["Access-Control-Allow-Origin"] == origin
    assert response["Vary"] == "Origin"
