"""A resource server process that has no database access validates the site's JWT access tokens
(RFC 9068) with the published JWK Set alone, and refuses a revoked one through the deny-list in
Redis (``tests/support/jwt_resource_server.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import redis

from mcp_oauth.authorization_server.tokens import signing_keys
from tests.support.oauth_helpers import first_pair

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/2")
SERVER = Path(__file__).resolve().parents[2] / "support" / "jwt_resource_server.py"


@pytest.fixture
def shared_token_cache(settings):
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=1).ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {REDIS_URL}")
    prefix = "jwtat-" + uuid.uuid4().hex[:8]
    settings.CACHES = {
        **settings.CACHES,
        "jwt_shared": {
            "BACKEND": "mcp_oauth.shared.redis_cache.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": prefix,
        },
    }
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE": "jwt_shared"}
    yield prefix
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(f"{prefix}:*"):
        client.delete(key)


@pytest.fixture
def other_process(client, shared_token_cache, resource):
    resource.jwt_access_tokens = True
    resource.save()
    signing_keys.rotate()
    env = {
        **os.environ,
        "JWKS": client.get("/oauth/jwks").content.decode(),
        "ISSUER": "http://testserver",
        "AUDIENCE": resource.uri,
        "REDIS_URL": REDIS_URL,
        "KEY_PREFIX": shared_token_cache,
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    process = subprocess.Popen([sys.executable, str(SERVER)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("listening "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        process.terminate()
        process.wait(10)


def call(base: str, token: str) -> tuple[int, dict]:
    request = urllib.request.Request(base + "/whoami", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_a_process_without_a_database_validates_the_token_and_honours_a_revocation(
    client, user, public_app, other_process, resource
):
    client.force_login(user)
    token = first_pair(client, public_app)["access_token"]
    status, claims = call(other_process, token)
    assert status == 200
    assert claims["sub"] == str(user.pk) and claims["client_id"] == public_app.client_id
    assert claims["aud"] == resource.uri

    head, body, signature = token.split(".")
    status, refused = call(other_process, f"{head}.{body}.{signature[::-1]}")
    assert (status, refused["error"]) == (401, "invalid_token")

    response = client.post("/oauth/revoke", {"token": token, "client_id": public_app.client_id})
    assert response.status_code == 200
    status, refused = call(other_process, token)
    assert (status, refused["reason"]) == (401, "revoked")
