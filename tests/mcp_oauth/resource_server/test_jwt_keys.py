"""The resource server's key ring (RFC 9068 §4): keys of the previous rotation verify during the
overlap, a key another process published is loaded on its generation, an unknown ``kid`` costs no query."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.models import AccessTokenSigningKey, ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from mcp_oauth.resource_server.jwt_keys import key_ring
from tests.support.jwt_access_tokens import RESOURCE, jwt_resource, logged_in, segments  # noqa: F401 - fixtures
from tests.support.oauth_helpers import bearer_status, bearer_works, first_pair

pytestmark = pytest.mark.django_db


def test_a_token_of_the_previous_key_verifies_during_the_overlap(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    signing_keys.rotate(publish_seconds=0)
    newer = first_pair(logged_in, public_app)["access_token"]
    assert segments(token)[0]["kid"] != segments(newer)[0]["kid"]
    assert bearer_works(logged_in, token) and bearer_works(logged_in, newer)
    AccessTokenSigningKey.objects.filter(kid=segments(token)[0]["kid"]).update(retire_at=timezone.now())
    signing_keys_changed()
    assert bearer_status(logged_in, token) == 401
    assert bearer_works(logged_in, newer)


def signing_keys_changed():
    from mcp_oauth.resource_server.jwt_keys import bump_keys_generation

    bump_keys_generation()  # a bulk update() sends no signal


def test_a_key_published_by_another_process_is_loaded_on_its_generation(jwt_resource):
    from django.core.cache import caches

    from mcp_oauth.resource_server.jwt_keys import KEYS_GENERATION_KEY, key_ring_for_generation
    from mcp_oauth.settings import mcp_oauth_settings

    cache = caches[mcp_oauth_settings.TOKEN_CACHE]
    ring = key_ring()
    generation = cache.get(KEYS_GENERATION_KEY)
    assert key_ring_for_generation(generation) is ring
    # another process rotates: its rows are in the database, its new generation in the shared cache
    AccessTokenSigningKey.objects.bulk_create(
        [
            AccessTokenSigningKey(
                kid="other-process",
                alg="ES256",
                public_jwk={**AccessTokenSigningKey.objects.get().public_jwk, "kid": "other-process"},
                private_key="-",
                signs_from=timezone.now() + timedelta(days=1),
            )
        ]
    )  # bulk_create sends no signal: this process has not heard of it
    assert key_ring() is ring and "other-process" not in ring.key_set
    cache.set(KEYS_GENERATION_KEY, "changed-elsewhere", timeout=None)
    assert key_ring_for_generation("changed-elsewhere") is None  # the event-loop path defers to the thread
    reloaded = key_ring()
    assert "other-process" in reloaded.key_set and reloaded is not ring


def test_an_unknown_kid_costs_no_query(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)
    head, body, signature = token.split(".")
    header = {**segments(token)[0], "kid": "unknown"}
    forged = f"{base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b'=').decode()}.{body}.{signature}"
    resource = ProtectedResource.objects.get(uri=RESOURCE)
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {forged}")
    with CaptureQueriesContext(connection) as queries, pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(request, resource)
    assert refused.value.error_description == "The access token is signed with an unknown key."
    assert queries.captured_queries == []
