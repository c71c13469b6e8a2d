"""The CIMD document cache (mcp_oauth.authorization_server.cimd.cache): max-age honoured and clamped, changes after max-age, conditional revalidation, refresh ahead of expiry, failures backed off, stale documents served then refused."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_oauth.models import AuditEvent, ClientMetadataDocument
from tests.mcp_oauth.authorization_server.cimd.test_oauth2_validator import (
    assert_error_page,
    authorize,
    entry,
    logged_in,  # noqa: F401 - fixtures
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def expire(client_id, seconds_ago=1):
    """Move the entry's freshness into the past, as if its max-age had run out."""
    past = timezone.now() - timedelta(seconds=seconds_ago)
    ClientMetadataDocument.objects.filter(client_id=client_id).update(
        expires_at=past, fetched_at=past - timedelta(hours=1)
    )


def test_cache_honours_max_age(cimd_env, logged_in):
    client_id = cimd_env.publish(max_age=3600)
    for _ in range(3):
        assert authorize(logged_in, client_id).status_code == 200
    assert len(cimd_env.server.fetches()) == 1


@pytest.mark.parametrize("header, lifetime", [("max-age=0", 1), ("no-store", 1), ("max-age=999999999", 86400)])
def test_lifetime_is_clamped_to_the_configured_bounds(cimd_env, logged_in, header, lifetime):
    client_id = cimd_env.publish(max_age=None)
    cimd_env.server.routes["/client.json"].headers["Cache-Control"] = header
    assert authorize(logged_in, client_id).status_code == 200
    cached = entry(client_id)
    assert (cached.expires_at - cached.fetched_at).total_seconds() == lifetime


def test_change_takes_effect_only_after_max_age(cimd_env, logged_in):
    client_id = cimd_env.publish(max_age=3600)
    route = cimd_env.server.routes["/client.json"]
    route.etag = '"v1"'
    assert authorize(logged_in, client_id).status_code == 200

    new_uri = "http://127.0.0.1/callback-v2"
    route.body = cimd_env.document(client_id, redirect_uris=[new_uri])
    route.etag = '"v2"'
    # Still fresh: the cached document is used; the new redirect URI is not known yet.
    assert_error_page(authorize(logged_in, client_id, redirect_uri=new_uri), "invalid_request")
    assert len(cimd_env.server.fetches()) == 1

    expire(client_id)
    assert authorize(logged_in, client_id, redirect_uri=new_uri).status_code == 200
    revalidation = cimd_env.server.fetches()[-1]
    assert revalidation.headers.get("If-None-Match") == '"v1"' and revalidation.status == 200
    assert_error_page(authorize(logged_in, client_id), "invalid_request")  # the old URI is gone
    assert get_application_model().objects.get(client_id=client_id).redirect_uris == new_uri
    assert entry(client_id).etag == '"v2"'


def test_expired_document_is_revalidated_with_a_conditional_request(cimd_env, logged_in):
    client_id = cimd_env.publish(max_age=600)
    cimd_env.server.routes["/client.json"].etag = '"same"'
    assert authorize(logged_in, client_id).status_code == 200
    expire(client_id)
    before = timezone.now()
    assert authorize(logged_in, client_id).status_code == 200
    first, second = cimd_env.server.fetches()
    assert "If-None-Match" not in first.headers
    assert second.headers["If-None-Match"] == '"same"' and second.status == 304
    cached = entry(client_id)
    assert cached.fetch_count == 2 and cached.fetched_at >= before and cached.expires_at > timezone.now()


def test_refresh_ahead_of_expiry_is_started_by_a_request(cimd_env, logged_in):
    client_id = cimd_env.publish(max_age=1000)
    cimd_env.server.routes["/client.json"].etag = '"v1"'
    assert authorize(logged_in, client_id).status_code == 200
    # 900 of 1000 seconds used: in the last 20 % of its lifetime, still fresh.
    moment = timezone.now()
    ClientMetadataDocument.objects.filter(client_id=client_id).update(
        fetched_at=moment - timedelta(seconds=900), expires_at=moment + timedelta(seconds=100)
    )
    assert authorize(logged_in, client_id).status_code == 200
    assert [seen.status for seen in cimd_env.server.fetches()] == [200, 304]
    assert (entry(client_id).expires_at - moment).total_seconds() > 900
    # Mid-life: no refresh.
    assert authorize(logged_in, client_id).status_code == 200
    assert len(cimd_env.server.fetches()) == 2


def test_failures_are_not_cached_as_valid_but_backed_off(cimd_env, logged_in, settings):
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", status=500)
    first = authorize(logged_in, client_id)
    # a transient failure on first fetch is temporarily_unavailable, not invalid_client
    html = assert_error_page(first, "temporarily_unavailable")
    assert first.status_code == 503 and 1 <= int(first["Retry-After"]) <= 300
    assert "HTTP 500" in html
    cached = entry(client_id)
    assert cached.document is None and cached.application_id is None
    assert cached.retry_after > timezone.now() and "HTTP 500" in cached.last_error
    assert not get_application_model().objects.filter(client_id=client_id).exists()
    assert AuditEvent.objects.filter(kind="cimd.fetch_failed", client_id=client_id).count() == 1

    # The server is fixed, but the back-off holds: same answer, no new fetch.
    cimd_env.publish()
    assert_error_page(authorize(logged_in, client_id), "temporarily_unavailable")
    assert len(cimd_env.server.fetches()) == 1

    ClientMetadataDocument.objects.filter(client_id=client_id).update(retry_after=timezone.now() - timedelta(seconds=1))
    assert authorize(logged_in, client_id).status_code == 200
    cached = entry(client_id)
    assert cached.document is not None and not cached.last_error and cached.retry_after is None


def test_invalid_refresh_is_refused_once_the_document_expired(cimd_env, logged_in, settings):
    """Stale-if-error is for transient failures only: an invalid new document is not one."""
    client_id = cimd_env.publish()
    assert authorize(logged_in, client_id).status_code == 200
    cimd_env.server.routes["/client.json"].body = cimd_env.document(client_id, client_secret="oops")
    expire(client_id)
    assert_error_page(authorize(logged_in, client_id), "invalid_client")
    cached = entry(client_id)
    assert "client_secret" in cached.last_error and not cached.last_error_transient
    assert AuditEvent.objects.filter(kind="cimd.fetch_failed", client_id=client_id).exists()


@pytest.mark.parametrize("status", [404, 410])
def test_withdrawn_document_is_refused_once_its_lifetime_ends(cimd_env, logged_in, settings, status):
    client_id = cimd_env.publish(max_age=1000)
    assert authorize(logged_in, client_id).status_code == 200
    cimd_env.server.serve("/client.json", status=status)
    # within its lifetime (a background revalidation saw the withdrawal): still served
    moment = timezone.now()
    ClientMetadataDocument.objects.filter(client_id=client_id).update(
        fetched_at=moment - timedelta(seconds=900), expires_at=moment + timedelta(seconds=100)
    )
    assert authorize(logged_in, client_id).status_code == 200
    assert f"HTTP {status}" in entry(client_id).last_error
    # lifetime over: refused at once, although CIMD_STALE_IF_ERROR_SECONDS (1 h) has not passed
    expire(client_id)
    ClientMetadataDocument.objects.filter(client_id=client_id).update(retry_after=None)
    html = assert_error_page(authorize(logged_in, client_id), "invalid_client")
    assert f"HTTP {status}" in html


@pytest.mark.parametrize("status", [500, 503])
def test_transient_failure_serves_the_stale_document_then_is_temporarily_unavailable(
    cimd_env, logged_in, settings, status
):
    client_id = cimd_env.publish()
    assert authorize(logged_in, client_id).status_code == 200
    good = entry(client_id).document
    cimd_env.server.serve("/client.json", status=status)
    expire(client_id)
    assert authorize(logged_in, client_id).status_code == 200  # stale-if-error
    cached = entry(client_id)
    assert cached.document == good and cached.last_error_transient
    # beyond the stale-if-error window: temporarily_unavailable, never invalid_client
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CIMD_STALE_IF_ERROR_SECONDS": 60}
    expire(client_id, seconds_ago=120)
    response = authorize(logged_in, client_id)
    assert_error_page(response, "temporarily_unavailable")
    assert response.status_code == 503 and int(response["Retry-After"]) >= 1
