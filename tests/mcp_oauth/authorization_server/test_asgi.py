"""The token endpoint's fast path: the token lane (mcp_oauth.authorization_server.asgi) and the
in-process client cache (mcp_oauth.authorization_server.client_registry.clients) with its invalidation."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_application_model

from mcp_oauth.authorization_server.asgi import TokenLane
from mcp_oauth.authorization_server.client_auth.client_secrets import hash_client_secret
from mcp_oauth.authorization_server.client_registry.clients import CLIENTS_GENERATION_KEY, bump_clients_generation
from mcp_oauth.health import HealthLane
from mcp_oauth.models import TrustRule
from mcp_oauth.settings import mcp_oauth_settings
from tests.support.asgi_client import asgi_call
from tests.support.oauth_helpers import basic

pytestmark = pytest.mark.django_db(transaction=True)

FORM = "application/x-www-form-urlencoded"


def grant(client_id: str, secret: str):
    return Client().post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(client_id, secret)
    )


@pytest.fixture
def django_app():
    from django.core.asgi import get_asgi_application

    return get_asgi_application()


# --- the lane -----------------------------------------------------------------------------------

#: Headers whose values must not differ between the lane and Django's full stack.
COMPARED = (
    "content-type",
    "cache-control",
    "pragma",
    "www-authenticate",
    "retry-after",
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    "x-frame-options",
    "access-control-allow-origin",
    "access-control-allow-methods",
    "access-control-allow-headers",
    "access-control-expose-headers",
)


def _requests(app_record, secret):
    cc = urlencode({"grant_type": "client_credentials"}).encode()
    good = {"Content-Type": FORM, "Authorization": basic(app_record.client_id, secret), "Origin": "https://x.example"}
    return [
        ("POST", good, cc),  # 200
        ("POST", {**good, "Authorization": basic(app_record.client_id, "wrong")}, cc),  # 401 Basic challenge
        ("POST", {"Content-Type": FORM}, urlencode({"grant_type": "password"}).encode()),  # unsupported_grant_type
        ("POST", {"Content-Type": FORM}, b""),  # no grant_type
        ("POST", {"Content-Type": FORM}, b"grant_type=client_credentials&grant_type=client_credentials"),  # repeated
        ("OPTIONS", {"Origin": "https://x.example", "Access-Control-Request-Method": "POST"}, b""),  # preflight
        ("GET", {}, b""),  # 405
    ]


def test_the_lane_answers_what_django_answers(service, django_app):
    app_record, secret = service
    lane = TokenLane(django_app)
    for method, headers, body in _requests(app_record, secret):
        ours = asgi_call(lane, method, "/oauth/token", headers, body)
        theirs = asgi_call(django_app, method, "/oauth/token", headers, body)
        assert ours[0] == theirs[0], (method, headers, body, ours, theirs)
        for name in COMPARED:
            assert ours[1].get(name) == theirs[1].get(name), (name, method, body, ours[1], theirs[1])
        if ours[0] == 200 and method == "POST":
            assert b"access_token" in ours[2] and ours[1]["cache-control"] == "no-store"
        else:
            assert ours[2] == theirs[2]


def _same_answer(lane, django_app, method, headers, body=b"", scheme="http"):
    ours = asgi_call(lane, method, "/oauth/token", headers, body, scheme=scheme)
    theirs = asgi_call(django_app, method, "/oauth/token", headers, body, scheme=scheme)
    assert ours[0] == theirs[0], (ours, theirs)
    for name in (*COMPARED, "location", "strict-transport-security"):
        assert ours[1].get(name) == theirs[1].get(name), (name, ours[1], theirs[1])
    return ours


def test_a_host_outside_allowed_hosts_gets_400_from_the_lane_as_from_django(service, django_app):
    app_record, secret = service
    headers = {"Content-Type": FORM, "Authorization": basic(app_record.client_id, secret), "Host": "evil.example"}
    status, _, body = _same_answer(TokenLane(django_app), django_app, "POST", headers, b"grant_type=client_credentials")
    assert status == 400
    assert b"access_token" not in body


def test_the_lane_applies_the_sites_https_redirect_and_hsts(service, settings):
    from django.core.asgi import get_asgi_application

    app_record, secret = service
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    django_app = get_asgi_application()  # its middleware reads these settings when loaded
    headers = {"Content-Type": FORM, "Authorization": basic(app_record.client_id, secret)}
    cc = b"grant_type=client_credentials"
    status, response_headers, _ = _same_answer(TokenLane(django_app), django_app, "POST", headers, cc)
    assert status == 301 and response_headers["location"] == "https://testserver/oauth/token"
    status, response_headers, body = _same_answer(TokenLane(django_app), django_app, "POST", headers, cc, "https")
    assert status == 200 and b"access_token" in body
    assert response_headers["strict-transport-security"] == "max-age=3600"


def test_the_lane_leaves_out_the_middleware_of_pages(service, django_app, settings):
    """Sessions, CSRF, authentication and messages concern pages: the lane does not run them."""
    app_record, secret = service
    lane = TokenLane(django_app)
    assert [type(instance).__name__ for instance in lane.middleware] == [
        "SecurityMiddleware",
        "CommonMiddleware",
        "XFrameOptionsMiddleware",
    ]
    status, headers, _ = asgi_call(
        lane,
        "POST",
        "/oauth/token",
        {"Content-Type": FORM, "Authorization": basic(app_record.client_id, secret), "Cookie": "sessionid=x"},
        b"grant_type=client_credentials",
    )
    assert status == 200 and "set-cookie" not in headers and "cookie" not in headers.get("vary", "").lower()


def test_an_unexpected_failure_gets_djangos_500_not_a_dropped_connection(service, django_app, monkeypatch, caplog):
    from mcp_oauth.authorization_server.views import MCPTokenView

    def broken(self, request, *args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(MCPTokenView, "post", broken)
    app_record, secret = service
    headers = {"Content-Type": FORM, "Authorization": basic(app_record.client_id, secret)}
    with caplog.at_level("ERROR", logger="django.request"):
        status, _, body = asgi_call(
            TokenLane(django_app), "POST", "/oauth/token", headers, b"grant_type=client_credentials"
        )
    assert status == 500 and b"boom" not in body
    assert any("boom" in str(record.exc_info[1]) for record in caplog.records if record.exc_info)


def test_the_lane_serves_only_the_token_endpoint(django_app):
    seen = []

    async def wrapped(scope, receive, send):
        seen.append(scope["path"])
        await django_app(scope, receive, send)

    lane = TokenLane(wrapped)
    assert lane.paths == frozenset({"/oauth/token"})
    asgi_call(lane, "GET", "/.well-known/oauth-authorization-server", {})
    asgi_call(lane, "POST", "/oauth/revoke", {"Content-Type": FORM}, b"token=x")
    asgi_call(lane, "POST", "/oauth/token", {"Content-Type": FORM}, b"grant_type=client_credentials")
    assert seen == ["/.well-known/oauth-authorization-server", "/oauth/revoke"]


def test_the_site_asgi_application_routes_the_token_endpoint_through_the_lane():
    from project.asgi import application

    # the health probes first (mcp_oauth.health), then the token lane: directly, or inside the
    # OAuth endpoints' tracing lane when an earlier test of this process turned tracing on
    assert isinstance(application, HealthLane)
    inner = application.app
    if getattr(inner, "__qualname__", "") == "oauth_tracing_lane.<locals>.lane":
        inner = inner.app
    assert isinstance(inner, TokenLane)


def test_the_lane_answers_503_when_the_cache_is_away(settings, resource, django_app):
    pytest.importorskip("redis")
    settings.CACHES = {
        "default": {
            "BACKEND": "mcp_oauth.shared.redis_cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens on port 1
            "OPTIONS": {"socket_connect_timeout": 0.2, "socket_timeout": 0.2},
        }
    }
    status, headers, body = asgi_call(
        TokenLane(django_app), "POST", "/oauth/token", {"Content-Type": FORM}, b"grant_type=client_credentials"
    )
    assert status == 503 and headers["retry-after"] == "2"
    assert b"temporarily_unavailable" in body


# --- the client cache ---------------------------------------------------------------------------


def test_a_warm_grant_reads_no_client_rule_or_resource_row(service):
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200  # loads the worker's cache
    with CaptureQueriesContext(connection) as queries:
        assert grant(app.client_id, secret).status_code == 200
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    for table in ("oauth2_provider_application", "mcp_oauth_trustrule", "mcp_oauth_protectedresource"):
        assert f'FROM "{table}"' not in sql, sql


def test_a_deleted_client_stops_working_at_once(service):
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    get_application_model().objects.get(pk=app.pk).delete()
    response = grant(app.client_id, secret)
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"


def test_a_changed_secret_applies_at_once(service):
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    app.client_secret = "a-new-secret-" + "x" * 30
    app.save()
    assert grant(app.client_id, secret).status_code == 401
    assert grant(app.client_id, "a-new-secret-" + "x" * 30).status_code == 200


def test_a_deny_rule_applies_at_once_and_so_does_disabling_it_in_bulk(service):
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    rule = TrustRule.objects.create(target=TrustRule.Target.CLIENT, pattern=app.client_id, action=TrustRule.Action.DENY)
    response = grant(app.client_id, secret)
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    TrustRule.objects.filter(pk=rule.pk).update(enabled=False)  # no signal: what the admin action does next
    bump_clients_generation()
    assert grant(app.client_id, secret).status_code == 200


def test_a_change_announced_by_another_worker_applies_here(service):
    """Another worker's signal only changes the shared generation: this worker reloads on it."""
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    new_hash = hash_client_secret("rotated-" + "y" * 40)
    get_application_model().objects.filter(pk=app.pk).update(client_secret=new_hash)  # no signal here
    caches[mcp_oauth_settings.TOKEN_CACHE].set(CLIENTS_GENERATION_KEY, "changed-elsewhere", timeout=None)
    assert grant(app.client_id, secret).status_code == 401
    assert grant(app.client_id, "rotated-" + "y" * 40).status_code == 200


def test_without_a_usable_cache_the_database_answers(service, settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    get_application_model().objects.filter(pk=app.pk).delete()
    assert grant(app.client_id, secret).status_code == 401


def test_a_change_whose_announcement_was_lost_applies_within_the_memory_limit(service):
    """A deny rule written where the cache could not be reached (or in bulk, without a signal)
    leaves the shared generation unchanged: a worker's memory still ends after CLIENT_CACHE_SECONDS."""
    from mcp_oauth.authorization_server.client_registry.clients import _registry

    app, secret = service
    assert grant(app.client_id, secret).status_code == 200  # this worker's memory holds the client and rules
    TrustRule.objects.bulk_create(  # no signal, no new generation: as if announced to an unreachable cache
        [TrustRule(target=TrustRule.Target.CLIENT, pattern=app.client_id, action=TrustRule.Action.DENY)]
    )
    assert grant(app.client_id, secret).status_code == 200  # within the limit: the memory answers
    _registry.started_at -= mcp_oauth_settings.CLIENT_CACHE_SECONDS + 1  # the limit has passed
    response = grant(app.client_id, secret)
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"


def test_no_client_memory_when_the_limit_is_zero(service, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CLIENT_CACHE_SECONDS": 0}
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    TrustRule.objects.bulk_create(
        [TrustRule(target=TrustRule.Target.CLIENT, pattern=app.client_id, action=TrustRule.Action.DENY)]
    )
    response = grant(app.client_id, secret)
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"


def test_a_huge_body_is_answered_413_without_being_stored(service, django_app, settings, monkeypatch):
    """A body far beyond ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is read to its end and answered 413, but the
    lane keeps no more of it than the view will look at (no disk filled by a client's upload)."""
    import tempfile

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    written: list[int] = []

    class Recording(tempfile.SpooledTemporaryFile):
        def write(self, data):
            written.append(len(data))
            return super().write(data)

    monkeypatch.setattr(tempfile, "SpooledTemporaryFile", Recording)
    app_record, secret = service
    headers = {"Content-Type": FORM, "Authorization": basic(app_record.client_id, secret)}
    status, _, body = asgi_call(
        TokenLane(django_app), "POST", "/oauth/token", headers, b"grant_type=client_credentials&x=" + b"a" * 1_000_000
    )
    assert status == 413, body
    assert sum(written) <= 1001
