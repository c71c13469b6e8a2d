"""The admin screens, as a superuser: pages render, filters and search work, actions do what they say,
nothing secret is shown, and the audit log cannot be edited."""

from __future__ import annotations

import secrets
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
    set_token_value,
)

from mcp_oauth.audit import record
from mcp_oauth.models import AuditEvent, ClientMetadataDocument, ClientProfile, Consent, McpSession, TrustRule
from tests.support.oauth_helpers import authorize_params, get_code, pkce_pair, token_request

pytestmark = pytest.mark.django_db

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
CIMD_URL = "https://tools.example.com/client.json"


@pytest.fixture
def admin(client, admin_user):
    client.force_login(admin_user)
    return client


def url(model, view="changelist", *args):
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def act(admin, model, action, objects, follow=True):
    return admin.post(
        url(model),
        {"action": action, "_selected_action": [str(o.pk) for o in objects], "index": 0},
        follow=follow,
    )


def messages_of(response):
    return [str(m) for m in response.context["messages"]]


def make_app(**fields):
    defaults = {
        "name": "Client",
        "client_type": "public",
        "authorization_grant_type": "authorization-code",
        "redirect_uris": "http://127.0.0.1/callback",
        "registration_source": "dcr",
    }
    return Application.objects.create(**{**defaults, **fields})


def live_token(application, user, with_refresh=True):
    token = AccessToken(user=user, application=application, scope="mcp", expires=timezone.now() + timedelta(hours=1))
    raw = secrets.token_urlsafe(32)
    set_token_value(token, raw)
    token.save()
    if with_refresh:
        refresh = RefreshToken(user=user, application=application, access_token=token)
        set_token_value(refresh, secrets.token_urlsafe(32))
        refresh.save()
    return raw


@pytest.fixture
def populated(user, other_user, resource):
    """One of everything, so each list page has rows to render."""
    dcr = make_app(name="Dyn client")
    cimd = make_app(
        name="Doc client", client_id=CIMD_URL, registration_source="cimd", redirect_uris="https://tools.example.com/cb"
    )
    manual = make_app(
        name="Admin client",
        registration_source="manual",
        client_type="confidential",
        redirect_uris="https://app.example.org/cb",
    )
    ClientProfile.objects.create(application=dcr, last_used_at=timezone.now())
    TrustRule.objects.create(target="client_id_host", pattern="*.example.com", action="allow", note="vendors")
    Consent.record_grant(user, dcr, ["mcp"], "http://testserver/mcp")
    Consent.record_grant(other_user, dcr, ["mcp"], "http://testserver/mcp")
    live_token(dcr, user)
    live_token(dcr, other_user)
    record(
        AuditEvent.Kind.TOKEN_ISSUED, user=user, client_id=dcr.client_id, detail={"grant_type": "authorization_code"}
    )
    record(AuditEvent.Kind.TRUST_DENIED, client_id="x", detail={"stage": "registration", "verdict": "denied"})
    ClientMetadataDocument.objects.create(
        client_id=CIMD_URL,
        application=cimd,
        document={"client_id": CIMD_URL, "client_name": "Doc client"},
        fetched_at=timezone.now(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    McpSession.objects.create(user=user, application=dcr, resource=resource, protocol_version="2025-11-25")
    return {"dcr": dcr, "cimd": cimd, "manual": manual}


LISTS = [
    (
        Application,
        [
            "",
            "q=Dyn",
            "registration_source__exact=dcr",
            "trust=trusted",
            "trust=unknown",
            "trust=denied",
            "used=never",
            "used=7",
            "used=old",
            "q=%00",
            "q=" + "x" * 2000,
        ],
    ),
    (TrustRule, ["", "q=example", "action__exact=allow", "target__exact=client_id_host", "enabled__exact=1"]),
    (Consent, ["", "q=alice", "state=active", "state=revoked", "q=%ED%A0%80"]),
    (AuditEvent, ["", "q=127.0.0.1", "kind__exact=trust.denied", "q=x", "created_at__year=2030"]),
    (ClientMetadataDocument, ["", "q=tools", "state=fresh", "state=failing", "state=never", "state=expired"]),
    (McpSession, ["", "q=alice"]),
]


@pytest.mark.parametrize(("model", "queries"), LISTS, ids=[m._meta.model_name for m, _ in LISTS])
def test_list_pages_render_with_filters_and_search(admin, populated, model, queries):
    for query in queries:
        response = admin.get(url(model) + "?" + query)
        assert response.status_code == 200, (query, response.status_code)


def test_trust_filter_selects_by_verdict(admin, populated):
    html = admin.get(url(Application) + "?trust=trusted").content.decode()
    assert "Doc client" in html and "Admin client" in html and "Dyn client" not in html
    html = admin.get(url(Application) + "?trust=unknown").content.decode()
    assert "Dyn client" in html and "Doc client" not in html


def test_change_pages_render_and_never_show_a_secret(admin, populated):
    manual = populated["manual"]
    secret = "s3cret-" + secrets.token_urlsafe(16)
    manual.client_secret = secret
    manual.hash_client_secret = False  # stored in clear: the worst case for a leak
    manual.save()
    html = admin.get(url(Application, "change", manual.pk)).content.decode()
    assert secret not in html and 'name="client_secret"' not in html
    dcr_html = admin.get(url(Application, "change", populated["dcr"].pk)).content.decode()
    assert "Dynamic Client Registration" in dcr_html and "trust verdict" in dcr_html.lower()
    for model in (Consent, AuditEvent, TrustRule, ClientMetadataDocument, McpSession):
        obj = model.objects.first()
        response = admin.get(url(model, "change", obj.pk))
        assert response.status_code == 200, model
    for token in AccessToken.objects.all():
        assert token.token_checksum not in dcr_html


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


# --- client actions ------------------------------------------------------------------------


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


# --- trust rules ---------------------------------------------------------------------------


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


# --- consents ------------------------------------------------------------------------------


def test_revoke_consent_revokes_that_users_tokens_only(admin, populated, user, other_user):
    dcr = populated["dcr"]
    consent = Consent.objects.get(user=user, application=dcr)
    response = act(admin, Consent, "revoke_consents", [consent])
    assert any("Revoked 1 consent" in m for m in messages_of(response))
    consent.refresh_from_db()
    assert consent.revoked_at is not None
    assert not AccessToken.objects.filter(user=user, application=dcr).exists()
    assert AccessToken.objects.filter(user=other_user, application=dcr).exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_REVOKED)
    assert event.user == user and event.detail["action"] == "revoke consent"
    # a new approval brings it back
    Consent.record_grant(user, dcr, ["mcp"])
    consent.refresh_from_db()
    assert consent.revoked_at is None


def test_consents_cannot_be_added_or_deleted_in_the_admin(admin, populated):
    consent = Consent.objects.first()
    assert admin.get(url(Consent, "add")).status_code == 403
    assert admin.post(url(Consent, "delete", consent.pk), {"post": "yes"}).status_code == 403
    assert Consent.objects.filter(pk=consent.pk).exists()


# --- audit log -----------------------------------------------------------------------------


def test_audit_log_is_read_only(admin, populated):
    event = AuditEvent.objects.first()
    assert admin.get(url(AuditEvent, "add")).status_code == 403
    assert admin.post(url(AuditEvent, "change", event.pk), {"kind": "token.revoked"}).status_code == 403
    assert admin.post(url(AuditEvent, "delete", event.pk), {"post": "yes"}).status_code == 403
    response = act(admin, AuditEvent, "delete_selected", [event], follow=False)
    assert AuditEvent.objects.filter(pk=event.pk, kind=event.kind).exists()
    assert response.status_code in (200, 302)
    page = admin.get(url(AuditEvent, "change", event.pk))
    assert page.status_code == 200 and "<pre>" in page.content.decode()


def test_audit_filter_by_kind(admin, populated):
    html = admin.get(url(AuditEvent) + "?kind__exact=trust.denied").content.decode()
    results = html.split('id="result_list"')[1].split("</table>")[0]
    assert "trust policy denied" in results and "token issued" not in results


# --- CIMD cache ----------------------------------------------------------------------------


def test_refresh_now_starts_a_fetch_despite_the_backoff(admin, populated, monkeypatch):
    from mcp_oauth.authorization_server.cimd import cache as cimd_cache

    entry = ClientMetadataDocument.objects.get()
    ClientMetadataDocument.objects.filter(pk=entry.pk).update(retry_after=timezone.now() + timedelta(hours=1))
    calls = []
    monkeypatch.setattr(cimd_cache, "start_fetch", lambda e, ip, refresh=False: calls.append((e.pk, refresh)) or True)
    response = act(admin, ClientMetadataDocument, "refresh_now", [entry])
    assert calls == [(entry.pk, True)]
    assert any("Refresh started for 1" in m for m in messages_of(response))
    entry.refresh_from_db()
    assert entry.retry_after is None


def test_cimd_entries_are_not_added_or_edited_by_hand(admin, populated):
    entry = ClientMetadataDocument.objects.get()
    assert admin.get(url(ClientMetadataDocument, "add")).status_code == 403
    admin.post(url(ClientMetadataDocument, "change", entry.pk), {"client_id": "https://evil.example/x"})
    entry.refresh_from_db()
    assert entry.client_id == CIMD_URL
