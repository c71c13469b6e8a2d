"""The clients and trust screens (mcp_oauth.admin.clients): client actions (revoke, block host, trust) and trust rules."""

from __future__ import annotations

import secrets
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.utils import timezone
from oauth2_provider.models import (
    set_token_value,
)

from mcp_oauth.models import AuditEvent, TrustRule
from tests.mcp_oauth.admin.test_admin import (  # noqa: F401 - fixtures and helpers
    AccessToken,
    Application,
    RefreshToken,
    act,
    admin,
    make_app,
    messages_of,
    populated,
    url,
)
from tests.support.oauth_helpers import authorize_params, get_code, pkce_pair, token_request

pytestmark = pytest.mark.django_db


def test_trust_filter_selects_by_verdict(admin, populated):
    html = admin.get(url(Application) + "?trust=trusted").content.decode()
    assert "Doc client" in html and "Admin client" in html and "Dyn client" not in html
    html = admin.get(url(Application) + "?trust=unknown").content.decode()
    assert "Dyn client" in html and "Doc client" not in html


def test_application_list_shows_verdict_and_last_use(admin, populated):
    html = admin.get(url(Application)).content.decode()
    assert "unknown" in html and "trusted" in html
    assert populated["cimd"].client_id in html


def test_add_application_form_still_works(admin):
    page = admin.get(url(Application, "add"))
    assert page.status_code == 200 and 'name="client_secret"' in page.content.decode()


def test_add_application_form_refuses_a_grant_type_this_server_does_not_serve(admin):
    """The form offers authorization code and client credentials only; a crafted POST of another
    type is refused as Django refuses any choice it did not offer, and nothing is created."""
    form = {
        "name": "legacy",
        "client_id": "legacy-client",
        "client_secret": "s" * 40,
        "client_type": "confidential",
        "authorization_grant_type": "password",
        "redirect_uris": "",
        "post_logout_redirect_uris": "",
        "allowed_origins": "",
        "algorithm": "",
        "skip_authorization": "",
    }
    page = admin.post(url(Application, "add"), form)
    assert page.status_code == 200  # the form again, with the error
    assert "Select a valid choice. password is not one of the available choices." in page.content.decode()
    assert not Application.objects.filter(client_id="legacy-client").exists()


def test_revoke_all_tokens(admin, populated, user):
    dcr = populated["dcr"]
    registration = AccessToken(
        application=dcr, scope="oauth2_provider:registration", expires=timezone.now() + timedelta(days=1)
    )
    set_token_value(registration, "reg-" + secrets.token_urlsafe(16))
    registration.save()
    response = act(admin, Application, "revoke_all_tokens", [dcr])
    assert response.status_code == 200
    assert any("Revoked" in m for m in messages_of(response))
    assert list(AccessToken.objects.filter(application=dcr)) == [registration]  # RFC 7592 token kept
    assert not RefreshToken.objects.filter(application=dcr, revoked__isnull=True).exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_REVOKED)
    assert event.client_id == dcr.client_id and event.detail["count"] == 4  # 2 refresh + 2 access
    assert event.detail["via"] == "admin"


def test_block_host_of_a_cimd_client(admin, populated):
    cimd = populated["cimd"]
    response = act(admin, Application, "block_host", [cimd])
    assert any("tools.example.com" in m for m in messages_of(response))
    rule = TrustRule.objects.get(target="client_id_host", pattern="tools.example.com")
    assert rule.action == "deny" and rule.created_by is not None


def test_block_host_of_a_dynamic_client(admin, populated, user):
    https_client = make_app(name="web", redirect_uris="https://web.example.net/cb http://127.0.0.1/cb")
    native = populated["dcr"]  # loopback redirects only: blocked by client_id, never "127.0.0.1" for everyone
    act(admin, Application, "block_host", [https_client, native])
    assert TrustRule.objects.filter(target="redirect_host", pattern="web.example.net", action="deny").exists()
    assert TrustRule.objects.filter(target="client", pattern=native.client_id, action="deny").exists()
    assert not TrustRule.objects.filter(pattern="127.0.0.1").exists()
    assert not AccessToken.objects.filter(application=native).exists()  # its tokens went too
    # and the block is enforced at the next authorization
    admin.logout()
    admin.force_login(user)
    _, challenge = pkce_pair()
    response = admin.get("/oauth/authorize?" + urlencode(authorize_params(native, challenge)))
    assert response.status_code == 403 and "Location" not in response


def test_block_turns_an_allow_rule_into_deny(admin, populated):
    TrustRule.objects.create(target="client_id_host", pattern="tools.example.com", action="allow")
    act(admin, Application, "block_host", [populated["cimd"]])
    assert TrustRule.objects.get(target="client_id_host", pattern="tools.example.com").action == "deny"


def test_trust_clients_releases_a_client_held_for_review(admin, populated, user, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "review"}
    held = populated["dcr"]
    html = admin.get(url(Application) + "?trust=review").content.decode()
    assert "Dyn client" in html
    act(admin, Application, "trust_clients", [held])
    assert TrustRule.objects.get(target="client", pattern=held.client_id).action == "allow"
    admin.force_login(user)
    code, verifier, _ = get_code(admin, held)
    assert token_request(admin, held, code, verifier).status_code == 200


def test_trust_warns_when_a_deny_rule_still_wins(admin, populated):
    TrustRule.objects.create(target="client_id_host", pattern="tools.example.com", action="deny")
    response = act(admin, Application, "trust_clients", [populated["cimd"]])
    assert any("Still denied" in m for m in messages_of(response))


def test_add_trust_rule_normalizes_and_records_who(admin, admin_user):
    response = admin.post(
        url(TrustRule, "add"),
        {
            "target": "redirect_host",
            "pattern": " Evil.EXAMPLE. ",
            "registration_source": "",
            "action": "deny",
            "enabled": "on",
            "note": "phishing",
        },
    )
    assert response.status_code == 302, response.content[:500]
    rule = TrustRule.objects.get()
    assert rule.pattern == "evil.example" and rule.created_by == admin_user


@pytest.mark.parametrize("pattern", ["https://evil.example/", "ev il", "*.", "\x00"])
def test_bad_trust_rule_is_a_form_error(admin, pattern):
    response = admin.post(
        url(TrustRule, "add"),
        {"target": "client_id_host", "pattern": pattern, "registration_source": "", "action": "deny", "enabled": "on"},
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors
    assert not TrustRule.objects.exists()


def test_trust_rule_list_shows_the_mode_and_toggles(admin, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "allowlist"}
    rule = TrustRule.objects.create(target="client_id_host", pattern="a.example", action="allow")
    html = admin.get(url(TrustRule)).content.decode()
    assert 'id="trust-mode"' in html and "<strong>allowlist</strong>" in html
    act(admin, TrustRule, "disable_rules", [rule])
    rule.refresh_from_db()
    assert rule.enabled is False
    act(admin, TrustRule, "enable_rules", [rule])
    rule.refresh_from_db()
    assert rule.enabled is True
