"""The reference site's ``ensure_oauth_client`` command: a hashed confidential client, a short secret refused."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.hashers import check_password
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.support.elicitation_keys import Application

pytestmark = pytest.mark.django_db


def test_ensure_oauth_client_creates_a_hashed_confidential_client():
    secret = "a-client-secret-of-32-characters"
    out = io.StringIO()
    call_command(
        "ensure_oauth_client",
        client_id="other-site",
        client_secret=secret,
        redirect_uri=["https://other.example.com/elicitation/callback/demo/"],
        stdout=out,
    )
    assert out.getvalue() == "OAuth client 'other-site' ready (https://other.example.com/elicitation/callback/demo/).\n"
    app = Application.objects.get(client_id="other-site")
    assert app.client_type == Application.CLIENT_CONFIDENTIAL
    assert app.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE
    assert app.redirect_uris == "https://other.example.com/elicitation/callback/demo/"
    assert app.name == "Demo third-party connection"
    assert app.hash_client_secret is True and app.skip_authorization is False
    assert app.registration_source == "manual"  # never pruned as an unused dynamic client
    assert app.client_secret != secret and secret not in app.client_secret
    assert check_password(secret, app.client_secret) is True
    assert check_password("another-secret-entirely", app.client_secret) is False

    # Twice: the same row is updated (new secret, new redirect URIs), not duplicated.
    second = "a-second-secret-of-32-characters"
    call_command(
        "ensure_oauth_client",
        "--redirect-uri",
        "https://other.example.com/cb1",
        "--redirect-uri",
        "https://other.example.com/cb2",
        client_id="other-site",
        client_secret=second,
        name="Renamed",
        stdout=io.StringIO(),
    )
    assert Application.objects.filter(client_id="other-site").count() == 1
    app = Application.objects.get(client_id="other-site")
    assert (app.name, app.redirect_uris) == ("Renamed", "https://other.example.com/cb1 https://other.example.com/cb2")
    assert check_password(second, app.client_secret) is True
    assert check_password(secret, app.client_secret) is False


def test_ensure_oauth_client_refuses_a_short_secret():
    with pytest.raises(CommandError, match="^--client-secret must have at least 16 characters$"):
        call_command(
            "ensure_oauth_client",
            client_id="x",
            client_secret="fifteen-chars!!",
            redirect_uri=["https://x.example.com/cb"],
        )
    assert not Application.objects.filter(client_id="x").exists()
    call_command(
        "ensure_oauth_client",
        client_id="x",
        client_secret="sixteen-chars!!!",
        redirect_uri=["https://x.example.com/cb"],
        stdout=io.StringIO(),
    )
    assert Application.objects.filter(client_id="x").count() == 1
