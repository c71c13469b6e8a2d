"""Attack/review of commit 03e5ea4 across processes: two uvicorn workers of the reference site on
PostgreSQL + Redis, each keeping the token entries it decoded (``DECODED_TOKEN_ENTRIES``).

Every token is used three times on each worker first, so that both have it kept decoded (the
first request of a worker may take the database path; the next ones come from the cache, the
third from the kept decode). Then each change is made here (this process shares the workers'
Redis, so its signals reach them) and must be refused by both workers at once, and still after
the entry was cached again with new bytes.

Skipped unless DATABASE_URL names PostgreSQL and Redis answers at TEST_REDIS_URL.
"""

from __future__ import annotations

from datetime import timedelta

import httpx2
import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.resource_server.cache import TOKEN_PREFIX, token_checksum
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.live import free_port
from tests.support.topology import asgi_worker
from tests.topology.test_production_topology import INIT, headers, shared  # noqa: F401 - shared is a fixture

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def statuses(urls: list[str], token: str) -> list[int]:
    return [httpx2.post(url, headers=headers(token), json=INIT, timeout=10).status_code for url in urls]


def row(token: str):
    return get_access_token_model().objects.get(token_checksum=token_checksum(token))


def test_every_change_is_refused_by_both_workers_although_kept_decoded(
    shared, user, other_user, public_app, mint_token, django_user_model
):
    from django.core.cache import cache

    port_a, base, prefix = shared
    port_b = free_port()
    resource = ensure_default_resource()
    Application = get_application_model()
    other_app = Application.objects.create(
        name="other",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    third_user = django_user_model.objects.create_user("carol", "carol@example.com", "correct horse battery")
    tokens = {
        "narrowed": mint_token(user, public_app, "mcp", resource.uri),
        "rebound": mint_token(user, public_app, "mcp", resource.uri),
        "expired": mint_token(user, public_app, "mcp", resource.uri),
        "revoked": mint_token(user, public_app, "mcp", resource.uri),
        "client deleted": mint_token(user, other_app, "mcp", resource.uri),
        "user deleted": mint_token(other_user, public_app, "mcp", resource.uri),
        "user deactivated": mint_token(third_user, public_app, "mcp", resource.uri),
        "kept": mint_token(user, public_app, "mcp", resource.uri),
    }
    urls = [f"{base}/mcp", f"http://127.0.0.1:{port_b}/mcp"]
    with asgi_worker(port_a, base, prefix), asgi_worker(port_b, base, prefix):
        for token in tokens.values():
            for _ in range(3):
                assert statuses(urls, token) == [200, 200]
            assert cache.get(TOKEN_PREFIX + token_checksum(token)) is not None

        narrowed = row(tokens["narrowed"])
        narrowed.scope = "profile"
        narrowed.save()
        rebound = row(tokens["rebound"])
        rebound.resource = ["https://elsewhere.example/mcp"]
        rebound.save()
        expired = row(tokens["expired"])
        expired.expires = timezone.now() - timedelta(seconds=1)
        expired.save()
        row(tokens["revoked"]).revoke()
        Application.objects.get(pk=other_app.pk).delete()
        django_user_model.objects.get(pk=other_user.pk).delete()
        third_user.is_active = False
        third_user.save()

        expected = {
            "narrowed": [403, 403],
            "rebound": [401, 401],
            "expired": [401, 401],
            "revoked": [401, 401],
            "client deleted": [401, 401],
            "user deleted": [401, 401],
            "user deactivated": [401, 401],
            "kept": [200, 200],
        }
        assert {name: statuses(urls, token) for name, token in tokens.items()} == expected

        # The tombstones expire; the database path caches the rows again (new bytes, or none):
        # the workers decode what Redis now holds, not what they kept.
        for token in tokens.values():
            cache.delete(TOKEN_PREFIX + token_checksum(token))
        for _ in range(2):
            assert {name: statuses(urls, token) for name, token in tokens.items()} == expected
        assert cache.get(TOKEN_PREFIX + token_checksum(tokens["narrowed"])).scope == "profile"
