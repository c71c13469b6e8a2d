"""Refresh idle window and absolute session cap (mcp_oauth.authorization_server.tokens.session_limits).

Times are moved on the rows (``created``, ``session_started_at``, ``last_granted_at``) instead of
waiting; the e2e tests (tests/e2e/test_session_lengths.py) wait for real with short settings.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from oauth2_provider.models import get_refresh_token_model

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.authorization_server.tokens.session_limits import connection_lapses, consent_lapsed
from mcp_oauth.models import AuditEvent, ClientProfile, Consent, RefreshGeneration
from tests.support.oauth_helpers import authorize_params, first_pair, pkce_pair

pytestmark = pytest.mark.django_db

DAY = 24 * 3600


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def refresh(client, app, refresh_token):
    return client.post(
        "/oauth/token", {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id}
    )


def age_refresh_tokens(seconds: float) -> None:
    get_refresh_token_model().objects.update(created=timezone.now() - timedelta(seconds=seconds))


def age_session(seconds: float) -> None:
    RefreshGeneration.objects.update(session_started_at=timezone.now() - timedelta(seconds=seconds))


def assert_refused(response, description: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["error"] == "invalid_grant"
    assert description in body["error_description"]
    assert response["Cache-Control"] == "no-store"


def test_a_refresh_token_within_its_idle_window_refreshes(logged_in, public_app):
    body = first_pair(logged_in, public_app)
    age_refresh_tokens(30 * DAY - 60)
    response = refresh(logged_in, public_app, body["refresh_token"])
    assert response.status_code == 200, response.content


def test_a_refresh_token_unused_past_the_idle_window_is_refused(logged_in, public_app, user):
    body = first_pair(logged_in, public_app)
    age_refresh_tokens(30 * DAY + 1)
    assert_refused(refresh(logged_in, public_app, body["refresh_token"]), "not used for too long")
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SESSION_IDLE_EXPIRED)
    assert event.user == user and event.client_id == public_app.client_id
    assert event.detail["idle_seconds"] == 30 * DAY
    # refused, not revoked: no reuse is recorded, and the family is left as it was
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 1


def test_each_refresh_starts_the_idle_window_again(logged_in, public_app):
    ClientProfile.objects.update_or_create(application=public_app, defaults={"refresh_token_idle_lifetime": 3600})
    body = first_pair(logged_in, public_app)
    for _ in range(3):
        age_refresh_tokens(3500)  # almost idle, then used: the new refresh token starts a new window
        response = refresh(logged_in, public_app, body["refresh_token"])
        assert response.status_code == 200, response.content
        body = response.json()
    age_refresh_tokens(3601)
    assert_refused(refresh(logged_in, public_app, body["refresh_token"]), "not used for too long")


def test_the_session_start_is_carried_across_rotations(logged_in, public_app):
    body = first_pair(logged_in, public_app)
    started = RefreshGeneration.objects.get().session_started_at
    for _ in range(3):
        body = refresh(logged_in, public_app, body["refresh_token"]).json()
    assert RefreshGeneration.objects.count() == 4
    assert set(RefreshGeneration.objects.values_list("session_started_at", flat=True)) == {started}


def test_past_the_cap_a_recently_used_session_is_refused(logged_in, public_app, user):
    body = first_pair(logged_in, public_app)
    body = refresh(logged_in, public_app, body["refresh_token"]).json()
    age_session(90 * DAY + 1)  # the refresh token itself is fresh
    assert_refused(refresh(logged_in, public_app, body["refresh_token"]), "maximum length")
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SESSION_CAP_REACHED)
    assert event.user == user and event.detail["session_max_seconds"] == 90 * DAY


def test_a_grace_sibling_is_refused_past_the_cap_too(logged_in, public_app):
    first = first_pair(logged_in, public_app)
    assert refresh(logged_in, public_app, first["refresh_token"]).status_code == 200
    age_session(90 * DAY + 1)
    assert_refused(refresh(logged_in, public_app, first["refresh_token"]), "maximum length")


def test_a_client_cap_overrides_the_site(logged_in, public_app):
    ClientProfile.objects.update_or_create(application=public_app, defaults={"session_max_lifetime": 600})
    body = first_pair(logged_in, public_app)
    age_session(599)
    body = refresh(logged_in, public_app, body["refresh_token"]).json()
    age_session(601)
    assert_refused(refresh(logged_in, public_app, body["refresh_token"]), "maximum length")


def test_no_cap_when_the_setting_is_none(logged_in, public_app, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": None}
    body = first_pair(logged_in, public_app)
    age_session(10 * 365 * DAY)
    assert refresh(logged_in, public_app, body["refresh_token"]).status_code == 200


def test_a_code_grant_without_offline_access_gets_a_refresh_token(logged_in, public_app):
    body = first_pair(logged_in, public_app)  # scope "mcp" only
    assert "offline_access" not in body["scope"].split()
    assert body["refresh_token"]


def _authorize_page(client, app):
    _verifier, challenge = pkce_pair()
    return client.get("/oauth/authorize?" + urlencode(authorize_params(app, challenge)))


class RememberingAdapter(DefaultMCPAdapter):
    """A site's adapter that skips the consent page for a client the user approved before."""

    def can_skip_consent(self, request, application, scopes, resource):
        return Consent.objects.filter(user=request.user, application=application, revoked_at__isnull=True).exists()


def test_a_remembered_consent_older_than_the_cap_is_asked_again(logged_in, public_app, user, settings):
    first_pair(logged_in, public_app)  # the user approved on the consent page
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": RememberingAdapter}
    skipped = _authorize_page(logged_in, public_app)
    assert skipped.status_code in (302, 303) and "code=" in skipped["Location"]  # remembered: no page
    assert not consent_lapsed(user, public_app)
    Consent.objects.update(last_granted_at=timezone.now() - timedelta(seconds=90 * DAY + 1))
    assert consent_lapsed(user, public_app)
    page = _authorize_page(logged_in, public_app)
    assert page.status_code == 200
    assert b'name="allow"' in page.content  # the consent page, whatever the adapter remembers


def test_connection_lapses_is_the_earlier_of_idle_and_cap(logged_in, public_app, user):
    first_pair(logged_in, public_app)
    now = timezone.now()
    lapse = connection_lapses(user, [public_app])[public_app.pk]
    assert lapse.reason == "idle"  # idle (30 d) before the cap (90 d)
    assert abs((lapse.at - (now + timedelta(days=30))).total_seconds()) < 10
    age_session(80 * DAY)
    lapse = connection_lapses(user, [public_app])[public_app.pk]
    assert lapse.reason == "cap"  # now the cap comes first
    assert abs((lapse.at - (now + timedelta(days=10))).total_seconds()) < 10
    for refresh_token in get_refresh_token_model().objects.all():
        refresh_token.revoke()  # its access token goes with it
    assert connection_lapses(user, [public_app])[public_app.pk] is None
    first_pair(logged_in, public_app)
    get_refresh_token_model().objects.update(revoked=timezone.now())  # an access token left alone: its expiry
    lapse = connection_lapses(user, [public_app])[public_app.pk]
    assert lapse.reason == "access_token"
    assert abs((lapse.at - (timezone.now() + timedelta(hours=1))).total_seconds()) < 10
