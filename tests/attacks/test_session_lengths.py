"""Attacks on session lengths (docs/how-to/session-lengths.md): a client stretching its own tokens,
a stolen refresh token kept alive past the cap, a cap-refused token turned into a reuse."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_application_model, get_refresh_token_model

from mcp_oauth.models import AuditEvent, ClientProfile, RefreshGeneration
from tests.support.oauth_helpers import REDIRECT_URI, first_pair, get_code, token_request

pytestmark = pytest.mark.django_db

DAY = 24 * 3600


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def refresh(client, app, refresh_token, **extra):
    return client.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id, **extra},
    )


def test_a_client_cannot_register_its_own_lifetimes(client, user, resource):
    body = {
        "redirect_uris": [REDIRECT_URI],
        "token_endpoint_auth_method": "none",
        "client_name": "Greedy",
        "access_token_lifetime": 10 * 365 * DAY,
        "refresh_token_idle_lifetime": 10 * 365 * DAY,
        "session_max_lifetime": 10 * 365 * DAY,
        "expires_in": 10 * 365 * DAY,
    }
    response = client.post("/oauth/register", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    app = get_application_model().objects.get(client_id=response.json()["client_id"])
    profile = ClientProfile.objects.get(application=app)
    assert (profile.access_token_lifetime, profile.refresh_token_idle_lifetime, profile.session_max_lifetime) == (
        None,
        None,
        None,
    )
    client.force_login(user)
    code, verifier, _ = get_code(client, app)
    token = token_request(client, app, code, verifier, expires_in=str(10 * 365 * DAY))  # asked for: ignored
    assert token.status_code == 200 and token.json()["expires_in"] == 3600


def test_a_stolen_refresh_token_does_not_outlive_the_cap(logged_in, public_app):
    body = first_pair(logged_in, public_app)
    RefreshGeneration.objects.update(session_started_at=timezone.now() - timedelta(seconds=90 * DAY + 1))
    # neither narrowing the scope nor naming the resource again starts a new session
    for extra in ({}, {"scope": "mcp"}, {"resource": "http://testserver/mcp"}):
        response = refresh(logged_in, public_app, body["refresh_token"], **extra)
        assert response.status_code == 400 and response.json()["error"] == "invalid_grant", response.content
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.SESSION_CAP_REACHED).count() == 3
    # the refusal revokes nothing: the token is no reuse, the family is not revoked under the user
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REFRESH_TOKEN_REUSE).exists()
    assert get_refresh_token_model().objects.filter(revoked__isnull=True).count() == 1


def test_a_session_cap_cannot_be_reset_by_rotating_quickly(logged_in, public_app):
    ClientProfile.objects.update_or_create(application=public_app, defaults={"session_max_lifetime": 600})
    body = first_pair(logged_in, public_app)
    started = RefreshGeneration.objects.get().session_started_at
    for _ in range(5):
        body = refresh(logged_in, public_app, body["refresh_token"]).json()
    RefreshGeneration.objects.update(session_started_at=started - timedelta(seconds=601))
    response = refresh(logged_in, public_app, body["refresh_token"])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"


def test_another_clients_refresh_token_gets_invalid_grant_without_an_event(logged_in, public_app, user):
    body = first_pair(logged_in, public_app)
    RefreshGeneration.objects.update(session_started_at=timezone.now() - timedelta(seconds=90 * DAY + 1))
    Application = get_application_model()
    other = Application.objects.create(
        name="Other",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
    )
    response = refresh(logged_in, other, body["refresh_token"])
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    # the presenting client learns nothing about the owner's session, and nothing is written for it
    assert "maximum length" not in response.json().get("error_description", "")
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.SESSION_CAP_REACHED).exists()
