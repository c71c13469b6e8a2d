"""Account lifecycle, PKCE challenge reuse, code lifetime and the consent redirect status (issue 11)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.models import AuditEvent, Consent
from mcp_oauth.signals import user_grants_revoked
from tests.support.oauth_helpers import (
    authorize_params,
    bearer_works,
    consent,
    get_code,
    hidden_fields,
    pkce_pair,
    redirect_query,
    token_request,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


def connected(client, app):
    code, verifier, _ = get_code(client, app)
    response = token_request(client, app, code, verifier)
    assert response.status_code == 200
    return response.json()


def refresh_status(client, app, tokens) -> int:
    return client.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": app.client_id},
    ).status_code


def assert_revoked(client, app, tokens, user, reason):
    assert not bearer_works(client, tokens["access_token"])
    assert refresh_status(client, app, tokens) == 400
    assert Consent.objects.get(user=user, application=app).revoked_at is not None
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    assert event.detail["reason"] == reason and event.detail["tokens"] == 2 and event.detail["consents"] == 1


def test_password_change_revokes_tokens_and_consents(logged_in, user, public_app, django_capture_on_commit_callbacks):
    tokens = connected(logged_in, public_app)
    assert bearer_works(logged_in, tokens["access_token"])
    received = []
    user_grants_revoked.connect(lambda **kw: received.append(kw), weak=False, dispatch_uid="test-lifecycle")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            user.set_password("a new password")
            user.save()
    finally:
        user_grants_revoked.disconnect(dispatch_uid="test-lifecycle")
    assert_revoked(logged_in, public_app, tokens, user, "password_changed")
    assert received and received[0]["reason"] == "password_changed" and len(received[0]["access_token_ids"]) == 1


def test_a_password_rehash_on_login_keeps_the_grants(logged_in, user, public_app, settings):
    """Django upgrades a stored hash when the user signs in (a new preferred hasher, more
    iterations): ``check_password`` saves the same password hashed again, with
    ``update_fields=["password"]``. That is no password change: the user's grants stay."""
    tokens = connected(logged_in, public_app)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    user.refresh_from_db()
    assert user.password.startswith("md5$")  # the old hasher: check_password will upgrade it
    assert user.check_password("correct horse battery")
    user.refresh_from_db()
    assert user.password.startswith("pbkdf2_sha256$")  # re-hashed and saved
    assert bearer_works(logged_in, tokens["access_token"])
    assert refresh_status(logged_in, public_app, tokens) == 200
    assert Consent.objects.get(user=user, application=public_app).revoked_at is None
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).exists()


@pytest.mark.parametrize("update_fields", [None, ["password"]])
def test_set_password_then_save_still_revokes(logged_in, user, public_app, update_fields):
    """``set_password`` leaves the raw password on the instance until the save: a change, whatever
    the save names."""
    tokens = connected(logged_in, public_app)
    user.set_password("another password")
    user.save(update_fields=update_fields)
    assert_revoked(logged_in, public_app, tokens, user, "password_changed")


def test_a_hash_assigned_directly_and_saved_whole_still_revokes(logged_in, user, public_app):
    """Only Django's own upgrade path (``_password`` unset and ``update_fields=["password"]``)
    counts as a re-hash: a hash assigned by hand and saved whole is a password change."""
    from django.contrib.auth.hashers import make_password

    tokens = connected(logged_in, public_app)
    user.password = make_password("another password")
    user.save()
    assert_revoked(logged_in, public_app, tokens, user, "password_changed")


def test_deactivation_revokes(logged_in, user, public_app):
    tokens = connected(logged_in, public_app)
    user.is_active = False
    user.save(update_fields=["is_active"])
    assert_revoked(logged_in, public_app, tokens, user, "deactivated")


def test_deletion_revokes_and_is_audited(logged_in, user, public_app):
    tokens = connected(logged_in, public_app)
    user.delete()
    assert not bearer_works(logged_in, tokens["access_token"])
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    # The event stays, anonymised (issue 34): no user link, no user id in detail, no IP address.
    assert event.detail == {"reason": "deleted", "client_id": None, "tokens": 2, "consents": 1}
    assert event.user is None and event.ip_address is None


def test_login_and_other_saves_revoke_nothing(logged_in, user, public_app):
    tokens = connected(logged_in, public_app)
    user.first_name = "Alice"
    user.save()
    user.last_login = timezone.now()
    user.save(update_fields=["last_login"])
    assert bearer_works(logged_in, tokens["access_token"])
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).exists()


def test_revoke_for_one_client_only(logged_in, user, public_app):
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    other = Application.objects.create(
        name="Other",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    mine = connected(logged_in, public_app)
    theirs = connected(logged_in, other)
    assert revoke_user_grants(user, public_app, reason="user_disconnected") == 2
    assert not bearer_works(logged_in, mine["access_token"]) and bearer_works(logged_in, theirs["access_token"])
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    assert event.client_id == public_app.client_id and event.detail["reason"] == "user_disconnected"


def test_registration_access_tokens_survive(user):
    from oauth2_provider.models import get_application_model
    from oauth2_provider.settings import oauth2_settings

    app = get_application_model().objects.create(
        name="Conf",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris="https://c.example/cb",
        user=user,
    )
    get_access_token_model().objects.create(
        user=user,
        application=app,
        scope=oauth2_settings.DCR_REGISTRATION_SCOPE,
        expires=timezone.now() + timedelta(days=1),
        token="x" * 40,
    )
    assert revoke_user_grants(user, reason="password_changed") == 0
    assert get_access_token_model().objects.count() == 1


def test_reused_code_challenge_is_recorded(logged_in, user, public_app):
    verifier, challenge = pkce_pair()
    for _ in range(2):
        redirect_query(consent(logged_in, authorize_params(public_app, challenge)))
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.PKCE_CHALLENGE_REUSED)
    assert events.count() == 1
    assert events[0].client_id == public_app.client_id and events[0].user == user
    assert events[0].detail == {"redirect_host": "127.0.0.1"}


def test_fresh_challenges_are_not_flagged(logged_in, public_app):
    get_code(logged_in, public_app)
    get_code(logged_in, public_app)
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.PKCE_CHALLENGE_REUSED).exists()


def test_authorization_codes_live_at_most_60_seconds(logged_in, public_app):
    before = timezone.now()
    code, verifier, _ = get_code(logged_in, public_app)
    grant = get_grant_model().objects.get()
    assert grant.expires <= before + timedelta(seconds=61)
    get_grant_model().objects.update(expires=timezone.now() - timedelta(seconds=1))
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert not get_refresh_token_model().objects.exists()


def test_consent_post_redirects_with_303(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    page = logged_in.get("/oauth/authorize?" + urlencode(params))
    form = hidden_fields(page.content.decode())
    allowed = logged_in.post("/oauth/authorize?" + urlencode(params), {**form, "allow": "Authorize"})
    assert allowed.status_code == 303 and "code=" in allowed["Location"]
    page = logged_in.get("/oauth/authorize?" + urlencode(params))
    form = hidden_fields(page.content.decode())
    form.pop("allow", None)
    denied = logged_in.post("/oauth/authorize?" + urlencode(params), form)
    assert denied.status_code == 303 and "error=access_denied" in denied["Location"]
