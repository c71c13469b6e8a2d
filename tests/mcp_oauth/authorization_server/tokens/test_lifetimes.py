"""Access-token lifetimes per client, resource, organization and site (mcp_oauth.authorization_server.tokens.lifetimes).

Each case goes through the token endpoint: the JSON ``expires_in`` and the stored
``AccessToken.expires`` must say the same thing.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_oauth.adapter import DefaultMCPAdapter
from mcp_oauth.admin.clients import ClientProfileForm
from mcp_oauth.authorization_server.tokens.lifetimes import (
    access_token_lifetime,
    refresh_token_idle_seconds,
    session_max_seconds,
)
from mcp_oauth.models import ClientProfile, ProtectedResource
from tests.support.oauth_helpers import first_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def refresh(client, app, refresh_token):
    return client.post(
        "/oauth/token", {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id}
    )


def set_client(app, **values):
    ClientProfile.objects.update_or_create(application=app, defaults=values)


def set_resource(resource, seconds):
    ProtectedResource.objects.filter(pk=resource.pk).update(access_token_lifetime=seconds)
    ProtectedResource.objects.get(pk=resource.pk).save()  # bumps the resource registry's generation


def stored_lifetime(body: dict) -> float:
    """Seconds from now to the stored expiry of the access token of ``body`` (the newest row)."""
    row = get_access_token_model().objects.order_by("-created").first()
    return (row.expires - timezone.now()).total_seconds()


def assert_agrees(body: dict, seconds: int) -> None:
    assert body["expires_in"] == seconds
    assert seconds - 5 < stored_lifetime(body) <= seconds


def test_the_site_lifetime_by_default(logged_in, public_app):
    assert_agrees(first_pair(logged_in, public_app), 3600)


def test_the_site_setting_is_read_at_issue(logged_in, public_app, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "ACCESS_TOKEN_EXPIRE_SECONDS": 900}
    assert_agrees(first_pair(logged_in, public_app), 900)


def test_the_resource_lifetime_wins_over_the_site(logged_in, public_app, resource):
    set_resource(resource, 600)
    body = first_pair(logged_in, public_app)
    assert_agrees(body, 600)
    assert_agrees(refresh(logged_in, public_app, body["refresh_token"]).json(), 600)


def test_the_client_lifetime_wins_over_the_resource(logged_in, public_app, resource):
    set_resource(resource, 600)
    set_client(public_app, access_token_lifetime=120)
    body = first_pair(logged_in, public_app)
    assert_agrees(body, 120)
    refreshed = refresh(logged_in, public_app, body["refresh_token"])
    assert refreshed.status_code == 200, refreshed.content
    assert_agrees(refreshed.json(), 120)


def test_a_changed_client_profile_applies_to_the_next_issue(logged_in, public_app):
    set_client(public_app, access_token_lifetime=120)
    body = first_pair(logged_in, public_app)
    assert body["expires_in"] == 120
    profile = ClientProfile.objects.get(application=public_app)
    profile.access_token_lifetime = 45
    profile.save()  # ends the clients generation (the per-worker memo)
    assert refresh(logged_in, public_app, body["refresh_token"]).json()["expires_in"] == 45


def test_another_client_keeps_the_site_lifetime(logged_in, public_app, db):
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    other = Application.objects.create(
        name="Other",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    set_client(other, access_token_lifetime=30)
    assert first_pair(logged_in, public_app)["expires_in"] == 3600


def test_the_organization_lifetime_is_a_ceiling(public_app, resource):
    from types import SimpleNamespace

    from mcp_oauth.models import Organization

    organization = Organization.objects.create(name="Acme", slug="acme", access_token_lifetime=300)
    set_client(public_app, access_token_lifetime=7200)
    request = SimpleNamespace(client=public_app, resource=[resource.uri], mcp_lifetime_organization_id=organization.pk)
    assert access_token_lifetime(request) == 300
    ClientProfile.objects.filter(application=public_app).update(access_token_lifetime=60)
    ClientProfile.objects.get(application=public_app).save()
    assert access_token_lifetime(request) == 60  # shorter than the organization's: kept
    request.mcp_lifetime_organization_id = None
    assert access_token_lifetime(request) == 60


def test_idle_and_cap_resolution(public_app, settings):
    assert refresh_token_idle_seconds(public_app) == 30 * 24 * 3600  # REFRESH_TOKEN_EXPIRE_SECONDS
    assert session_max_seconds(public_app) == 90 * 24 * 3600  # MCP_OAUTH["SESSION_MAX_SECONDS"]
    set_client(public_app, refresh_token_idle_lifetime=3600, session_max_lifetime=86400)
    assert refresh_token_idle_seconds(public_app) == 3600
    assert session_max_seconds(public_app) == 86400
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": None}
    assert session_max_seconds(None) is None
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "REFRESH_TOKEN_EXPIRE_SECONDS": timedelta(minutes=30)}
    assert refresh_token_idle_seconds(public_app) == 1800  # never longer than the site's


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("access_token_lifetime", 0, "at least one second"),
        ("session_max_lifetime", 0, "at least one second"),
        ("refresh_token_idle_lifetime", 30 * 24 * 3600 + 1, "At most the site's refresh token lifetime"),
    ],
)
def test_the_admin_form_refuses_lifetimes_out_of_bounds(public_app, field, value, error):
    form = ClientProfileForm(data={"application": public_app.pk, "metadata": "{}", field: value})
    assert not form.is_valid()
    assert error in " ".join(form.errors[field])


def test_the_admin_form_accepts_lifetimes(public_app):
    form = ClientProfileForm(
        data={
            "application": public_app.pk,
            "metadata": "{}",
            "client_secret_expires_at": 0,
            "access_token_lifetime": 300,
            "refresh_token_idle_lifetime": 7 * 24 * 3600,
            "session_max_lifetime": 30 * 24 * 3600,
        }
    )
    assert form.is_valid(), form.errors


@pytest.mark.parametrize(
    ("value", "errors"),
    [(None, []), (3600, []), (0, ["mcp_oauth.E048"]), ("90d", ["mcp_oauth.E048"]), (True, ["mcp_oauth.E048"])],
)
def test_the_session_cap_setting_is_checked(settings, value, errors):
    from django.core.checks import Error

    from mcp_oauth.checks import check_rotation_and_scopes

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": value}
    assert [m.id for m in check_rotation_and_scopes(None) if isinstance(m, Error)] == errors


class TenMinutesForAlice(DefaultMCPAdapter):
    def access_token_lifetime(self, request, seconds):
        return 600 if getattr(request.user, "username", None) == "alice" else seconds


def test_the_adapter_has_the_last_word(logged_in, public_app, settings):
    set_client(public_app, access_token_lifetime=120)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": TenMinutesForAlice}
    body = first_pair(logged_in, public_app)
    assert_agrees(body, 600)
    assert_agrees(refresh(logged_in, public_app, body["refresh_token"]).json(), 600)


def test_a_refused_resource_is_still_invalid_target_and_audited(logged_in, public_app):
    from mcp_oauth.models import AuditEvent
    from tests.support.oauth_helpers import get_code, token_request

    code, verifier, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, verifier, resource="https://elsewhere.example/mcp")
    assert response.status_code == 400 and response.json()["error"] == "invalid_target"
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.INVALID_RESOURCE).count() == 1


def test_the_lifetime_of_a_request_without_a_bound_resource_is_the_sites(public_app, resource):
    from types import SimpleNamespace

    set_resource(resource, 600)
    assert access_token_lifetime(SimpleNamespace(client=public_app, resource="not a uri")) == 3600
    assert access_token_lifetime(SimpleNamespace(client=None, resource=[resource.uri])) == 600
    assert access_token_lifetime(SimpleNamespace(client=None, resource=resource.uri)) == 600
