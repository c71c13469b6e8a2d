"""The reference site's ``ensure_demo_user`` command (run by ``make run`` at every start)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import AuditEvent

pytestmark = pytest.mark.django_db


def ensure(password: str = "demo-password") -> str:
    out = io.StringIO()
    call_command("ensure_demo_user", "--superuser", username="demo", password=password, stdout=out)
    return out.getvalue()


def test_running_it_again_keeps_the_users_tokens(mint_token):
    """A restart of ``make run`` does not sign the demo user's MCP clients out."""
    assert "Created user 'demo'." in ensure()
    user = get_user_model().objects.get(username="demo")
    assert user.check_password("demo-password") and user.is_superuser
    application = get_application_model().objects.create(
        name="Client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    mint_token(user, application)
    revoked_before = AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).count()

    assert "Updated user 'demo'." in ensure()

    assert get_access_token_model().objects.filter(user=user).count() == 1
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).count() == revoked_before


def test_a_new_password_is_set_and_revokes_the_tokens(mint_token):
    ensure()
    user = get_user_model().objects.get(username="demo")
    application = get_application_model().objects.create(
        name="Client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    mint_token(user, application)

    ensure("another-password")

    user.refresh_from_db()
    assert user.check_password("another-password")
    assert not get_access_token_model().objects.filter(user=user).exists()
