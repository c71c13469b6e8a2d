"""Throttling of the registration, authorization and token endpoints (429 with Retry-After)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.core.cache import cache

from mcp_oauth.shared import throttling
from tests.support.oauth_helpers import authorize_params, pkce_pair

pytestmark = pytest.mark.django_db

REGISTRATION = {"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def rates(settings):
    def set_rates(**rates):
        settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": rates}

    return set_rates


def register(client, **extra):
    return client.post("/oauth/register", json.dumps(REGISTRATION), content_type="application/json", **extra)


def assert_429(response, period, error="slow_down"):
    assert response.status_code == 429, response.content[:300]
    retry_after = int(response["Retry-After"])
    assert 1 <= retry_after <= period
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["error"] == error and "retry" in body["error_description"]


@pytest.mark.parametrize(
    ("rate", "parsed"),
    [("60/minute", (60, 60)), ("5/s", (5, 1)), ("10 / Hour", (10, 3600)), ("1000/day", (1000, 86400)), (None, None)],
)
def test_parse_rate(rate, parsed):
    assert throttling.parse_rate(rate) == parsed


@pytest.mark.parametrize("rate", ["ten/minute", "5/fortnight", "5", "/minute", "-1/minute", ""])
def test_parse_rate_refuses_nonsense(rate):
    with pytest.raises(ValueError):
        throttling.parse_rate(rate)


def test_defaults_are_on_and_merged(settings):
    assert throttling.rate_for("register") == (30, 3600)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": {"token": None}}
    assert throttling.rate_for("token") is None
    assert throttling.rate_for("authorize") == (60, 60)  # the other defaults stay


def test_registration_is_throttled(client, resource, rates):
    rates(register="2/hour")
    assert register(client).status_code == 201
    assert register(client).status_code == 201
    assert_429(register(client), 3600)
    # another caller is not affected
    assert register(client, REMOTE_ADDR="198.51.100.7").status_code == 201


def test_token_endpoint_is_throttled(client, resource, public_app, rates):
    rates(token="3/minute")
    data = {
        "grant_type": "authorization_code",
        "code": "nope",
        "client_id": public_app.client_id,
        "redirect_uri": "http://127.0.0.1/callback",
        "code_verifier": "x" * 43,
    }
    for _ in range(3):
        assert client.post("/oauth/token", data).status_code == 400  # invalid_grant, counted all the same
    assert_429(client.post("/oauth/token", data), 60)
    # the registration scope has its own counter
    assert register(client).status_code == 201


def test_authorization_endpoint_answers_a_browser_with_a_page(client, user, resource, public_app, rates):
    rates(authorize="1/minute")
    client.force_login(user)
    url = "/oauth/authorize?" + urlencode(authorize_params(public_app, pkce_pair()[1]))
    assert client.get(url, HTTP_ACCEPT="text/html").status_code == 200
    response = client.get(url, HTTP_ACCEPT="text/html,application/xhtml+xml")
    assert response.status_code == 429
    assert "Location" not in response
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response["X-Frame-Options"] == "DENY"
    html = response.content.decode()
    assert 'id="error-code">temporarily_unavailable<' in html
    # a non-browser caller gets JSON
    other = client.get(url)
    assert other.status_code == 429 and other.json()["error"] == "temporarily_unavailable"


def test_none_switches_a_scope_off(client, resource, rates):
    rates(register=None)
    for _ in range(5):
        assert register(client).status_code == 201


def test_custom_caller_key(client, resource, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "THROTTLE_RATES": {"register": "1/hour"},
        "THROTTLE_KEY_FUNCTION": "tests.mcp_oauth.shared.test_throttling.key_by_header",
    }
    assert register(client, HTTP_X_TENANT="a").status_code == 201
    assert register(client, HTTP_X_TENANT="b").status_code == 201
    assert register(client, HTTP_X_TENANT="a").status_code == 429


def key_by_header(request, scope):
    return request.META.get("HTTP_X_TENANT", "")


def test_counter_that_expired_between_add_and_incr(rf, rates, monkeypatch):
    """``incr`` of a key that vanished restarts the count instead of failing."""
    rates(token="1/minute")

    class Flaky:
        def add(self, *args):
            return True

        def incr(self, key):
            raise ValueError(key)

        def set(self, *args):
            self.set_called = True

    flaky = Flaky()
    monkeypatch.setattr(throttling, "caches", {"default": flaky})
    assert throttling.check(rf.post("/oauth/token"), "token") is None
    assert flaky.set_called


def test_malformed_rate_is_a_check_error_not_a_500(client, resource, rates):
    from mcp_oauth.checks import check_trust_and_throttling

    rates(register="lots")
    assert [m.id for m in check_trust_and_throttling(None)] == ["mcp_oauth.E032"]
    assert register(client).status_code == 201  # unthrottled until fixed, and logged
