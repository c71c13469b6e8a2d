"""Access-token signing keys: rotation publishes a key before it signs and retires the old one after
the longest token lifetime, the private key encrypted at rest and re-encrypted under new keys."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.models import AccessTokenSigningKey
from mcp_oauth.resource_server.jwt_keys import key_ring
from tests.support.jwt_access_tokens import jwt_resource, logged_in, segments  # noqa: F401 - fixtures
from tests.support.oauth_helpers import bearer_works, first_pair

pytestmark = pytest.mark.django_db


def test_rotation_publishes_before_signing_and_retires_after_the_longest_lifetime(jwt_resource):
    first = AccessTokenSigningKey.objects.get()
    now = timezone.now()
    created, retiring = signing_keys.rotate(publish_seconds=600, now=now)
    assert [key.kid for key in retiring] == [first.kid]
    assert created.signs_from == now + timedelta(seconds=600)
    first.refresh_from_db()
    assert first.retire_at == now + timedelta(seconds=600 + 3600)
    ring = key_ring()
    assert {jwk["kid"] for jwk in ring.jwks()["keys"]} == {first.kid, created.kid}
    assert ring.signing_key(now).kid == first.kid  # the new key is published, not signing yet
    assert ring.signing_key(now + timedelta(seconds=601)).kid == created.kid
    assert signing_keys.prune(now + timedelta(seconds=600 + 3601)) == 1
    assert list(AccessTokenSigningKey.objects.values_list("kid", flat=True)) == [created.kid]


def test_the_private_key_is_encrypted_at_rest(jwt_resource, settings):
    key = AccessTokenSigningKey.objects.get()
    assert "PRIVATE KEY" not in key.private_key
    assert b"PRIVATE KEY" in signing_keys.decrypt_private_key(key.private_key)


def test_encryption_keys_setting_and_reencryption(jwt_resource, settings):
    key = AccessTokenSigningKey.objects.get()
    first = "a" * 40
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": [first, settings.SECRET_KEY]}
    assert signing_keys.reencrypt() == 1
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": [first]}
    key.refresh_from_db()
    assert b"PRIVATE KEY" in signing_keys.decrypt_private_key(key.private_key)


def test_an_rs256_key_signs_tokens_the_site_accepts(logged_in, jwt_resource, public_app):
    signing_keys.rotate(alg="RS256", publish_seconds=0)
    token = first_pair(logged_in, public_app)["access_token"]
    assert segments(token)[0]["alg"] == "RS256"
    assert bearer_works(logged_in, token)
