"""Client secrets: a fast keyed hash for machine secrets, legacy hashes upgraded on use,
failures throttled per caller and client (mcp_oauth.authorization_server.client_auth.client_secrets)."""

from __future__ import annotations

import pytest
from django.contrib.auth.hashers import make_password
from django.core.checks import Error
from django.test import Client
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.authorization_server.client_auth.client_authentication import check_client_secret
from mcp_oauth.authorization_server.client_auth.client_secrets import ClientSecretHasher, hash_client_secret
from mcp_oauth.checks import check_client_secret_hasher, check_fast_client_secret_hasher
from tests.support.oauth_helpers import basic

pytestmark = pytest.mark.django_db


def grant(client_id: str, secret: str):
    return Client().post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(client_id, secret)
    )


def test_new_secrets_are_stored_with_the_machine_secret_hash(service):
    app, secret = service
    app.refresh_from_db()
    algorithm, salt, digest = app.client_secret.split("$")
    assert algorithm == "mcp_oauth_sha256" and len(salt) == 32 and len(digest) == 64
    assert secret not in app.client_secret


def test_client_credentials_with_basic_and_post_authentication(service):
    app, secret = service
    assert grant(app.client_id, secret).status_code == 200
    response = Client().post(
        "/oauth/token", {"grant_type": "client_credentials", "client_id": app.client_id, "client_secret": secret}
    )
    assert response.status_code == 200, response.content


def test_wrong_secret_is_invalid_client(service):
    app, secret = service
    response = grant(app.client_id, secret[:-1] + ("x" if secret[-1] != "x" else "y"))
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_a_legacy_pbkdf2_hash_is_upgraded_after_a_successful_use(service, settings):
    settings.PASSWORD_HASHERS = [*settings.PASSWORD_HASHERS, "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    app, secret = service
    legacy = make_password(secret, hasher="pbkdf2_sha256")
    get_application_model().objects.filter(pk=app.pk).update(client_secret=legacy)
    assert grant(app.client_id, "not-the-secret").status_code == 401
    app.refresh_from_db()
    assert app.client_secret == legacy  # a failure upgrades nothing
    assert grant(app.client_id, secret).status_code == 200
    app.refresh_from_db()
    assert app.client_secret.startswith("mcp_oauth_sha256$")
    assert grant(app.client_id, secret).status_code == 200  # and the upgraded hash verifies


def test_a_plain_text_secret_still_compares(service):
    app, secret = service
    get_application_model().objects.filter(pk=app.pk).update(client_secret=secret)
    assert check_client_secret(secret, secret) is True
    assert check_client_secret(secret + "x", secret) is False


def grant_from(address: str, client_id: str, secret: str):
    return Client(REMOTE_ADDR=address).post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(client_id, secret)
    )


def test_failed_authentication_is_throttled_per_caller_and_client(service, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "THROTTLE_RATES": {"client_auth_failure": "3/minute", "token": None}}
    app, secret = service
    Application = get_application_model()
    other = Application(name="other", client_type="confidential", authorization_grant_type="client-credentials")
    other_secret = other.client_secret
    other.save()
    for _ in range(3):
        response = grant_from("203.0.113.9", app.client_id, "guess")
        assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    # over the limit: this caller is refused for this client without verifying, with 429 slow_down
    response = grant_from("203.0.113.9", app.client_id, secret)
    assert response.status_code == 429
    assert response.json()["error"] == "slow_down"
    assert 1 <= int(response["Retry-After"]) <= 60
    assert response["Cache-Control"] == "no-store"
    # the attacker cannot lock the real client out: another caller with the right secret gets its token
    assert grant_from("198.51.100.7", app.client_id, secret).status_code == 200
    # and the throttled caller's other clients are not affected
    assert grant_from("203.0.113.9", other.client_id, other_secret).status_code == 200


def caller_by_header(request, scope):
    return request.headers.get("X-Caller", "anonymous")


def test_client_auth_failures_are_counted_by_the_throttle_key_function(service, settings):
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "THROTTLE_RATES": {"client_auth_failure": "2/minute", "token": None},
        "THROTTLE_KEY_FUNCTION": "tests.mcp_oauth.authorization_server.client_auth.test_client_secrets.caller_by_header",
    }
    app, secret = service

    def attempt(caller: str, value: str):
        return Client().post(
            "/oauth/token",
            {"grant_type": "client_credentials"},
            HTTP_AUTHORIZATION=basic(app.client_id, value),
            HTTP_X_CALLER=caller,
        )

    assert attempt("mallory", "guess").status_code == 401
    assert attempt("mallory", "guess").status_code == 401
    assert attempt("mallory", secret).status_code == 429
    assert attempt("alice", secret).status_code == 200


def test_invalid_client_after_basic_has_a_basic_challenge(service):
    app, secret = service
    response = grant(app.client_id, "not-the-secret")
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    assert response["WWW-Authenticate"] == 'Basic realm="http://testserver"'
    assert response["Cache-Control"] == "no-store"


def test_hasher_round_trip_and_salt():
    hasher = ClientSecretHasher()
    first, second = hash_client_secret("s" * 40), hash_client_secret("s" * 40)
    assert first != second  # salted
    assert hasher.verify("s" * 40, first) and hasher.verify("s" * 40, second)
    assert not hasher.verify("s" * 39, first)
    assert hasher.must_update(first) is False
    assert set(hasher.safe_summary(first)) == {"algorithm", "salt", "hash"}


def test_check_reports_a_hasher_missing_from_password_hashers(settings):
    assert check_client_secret_hasher(None) == []
    assert check_fast_client_secret_hasher(None) == []
    assert oauth2_settings.CLIENT_SECRET_HASHER == "mcp_oauth_sha256"
    # Not listed: DOT's default applies (secrets stay storable and verifiable), --deploy warns.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    assert oauth2_settings.CLIENT_SECRET_HASHER == "default"
    assert check_client_secret_hasher(None) == []
    assert [message.id for message in check_fast_client_secret_hasher(None)] == ["mcp_oauth.W051"]
    # Named explicitly but not listed: Django could neither store nor verify such secrets.
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CLIENT_SECRET_HASHER": "mcp_oauth_sha256"}
    messages = check_client_secret_hasher(None)
    assert [message.id for message in messages] == ["mcp_oauth.E050"]
    assert (
        isinstance(messages[0], Error)
        and "mcp_oauth.authorization_server.client_auth.client_secrets.ClientSecretHasher" in messages[0].hint
    )
