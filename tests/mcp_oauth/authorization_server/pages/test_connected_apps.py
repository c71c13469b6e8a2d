"""The connected-apps page (``/oauth/connected-apps/``) and :func:`mcp_oauth.authorization_server.tokens.grants.revoke_user_grants`."""

from __future__ import annotations

import json
import secrets

import pytest
from django.test import Client
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
    set_token_value,
)

from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants, user_grants
from mcp_oauth.models import AuditEvent, Consent, Organization, OrganizationMembership
from tests.support.oauth_helpers import token_request
from tests.support.organization_helpers import checksum, code_for

pytestmark = pytest.mark.django_db

PAGE = "/oauth/connected-apps/"
PASSWORD = "correct horse battery"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def signed_in(user, **kwargs) -> Client:
    client = Client(**kwargs)
    assert client.login(username=user.username, password=PASSWORD)
    return client


def authorize(user, application, resource, mint_token) -> tuple[str, str]:
    """What the consent page leaves behind: a consent, an access token and its refresh token."""
    Consent.record_grant(user, application, ["mcp"], resource.uri)
    access = mint_token(user, application, resource=resource.uri)
    refresh = secrets.token_urlsafe(32)
    token = get_refresh_token_model()(
        user=user,
        application=application,
        access_token=get_access_token_model().objects.filter(user=user, application=application).latest("id"),
    )
    set_token_value(token, refresh)
    token.save()
    return access, refresh


def mcp_status(token: str) -> int:
    response = Client().post(
        "/mcp",
        data=json.dumps(INITIALIZE),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_ACCEPT="application/json, text/event-stream",
    )
    return response.status_code


@pytest.fixture
def cimd_app(db):
    Application = get_application_model()
    app = Application.objects.create(
        name="CIMD tool",
        client_id="https://tools.example.com/client.json",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1/callback",
    )
    Application.objects.filter(pk=app.pk).update(registration_source="cimd")
    app.refresh_from_db()
    return app


def test_login_required(client, resource):
    response = client.get(PAGE)
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/oauth/connected-apps/"


def test_page_lists_the_users_clients_and_is_not_frameable_or_cached(
    user, other_user, public_app, cimd_app, resource, mint_token
):
    authorize(user, public_app, resource, mint_token)
    authorize(user, cimd_app, resource, mint_token)
    authorize(other_user, public_app, resource, mint_token)
    response = signed_in(user).get(PAGE)
    html = response.content.decode()
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY" and "frame-ancestors 'none'" in response["Content-Security-Policy"]
    assert "no-store" in response["Cache-Control"] and response["Referrer-Policy"] == "same-origin"
    assert html.count('class="row grant"') == 2
    assert "Test client" in html and "CIMD tool" in html
    assert 'data-source="cimd">identified by its metadata document at <strong>tools.example.com</strong>' in html
    assert 'data-source="manual">registered by this site' in html
    assert "<code>mcp</code>" in html and f"<code>{resource.uri}</code>" in html
    grants = {grant.name: grant for grant in user_grants(user)}
    assert grants["CIMD tool"].client_id_host == "tools.example.com" and grants["Test client"].client_id_host is None
    assert grants["Test client"].last_used_at is not None and grants["Test client"].scopes == ["mcp"]


def test_revoke_one_client_revokes_its_tokens_and_consent_and_is_audited(
    user, public_app, cimd_app, resource, mint_token
):
    access, refresh = authorize(user, public_app, resource, mint_token)
    kept_access, _ = authorize(user, cimd_app, resource, mint_token)
    assert mcp_status(access) == 200
    browser = signed_in(user)
    response = browser.post(PAGE, {"action": "revoke", "client_id": public_app.client_id})
    assert response.status_code == 303 and response["Location"] == PAGE
    page = browser.get(PAGE).content.decode()
    assert "Test client can no longer use your account: its access was revoked (2 tokens)." in page
    assert 'data-client-id="' + public_app.client_id not in page and "CIMD tool" in page

    # The access token answers 401 at /mcp; the refresh token no longer refreshes.
    assert mcp_status(access) == 401
    assert mcp_status(kept_access) == 200
    refreshed = Client().post(
        "/oauth/token", {"grant_type": "refresh_token", "refresh_token": refresh, "client_id": public_app.client_id}
    )
    assert refreshed.status_code == 400 and refreshed.json()["error"] == "invalid_grant"
    consent = Consent.objects.get(user=user, application=public_app)
    assert consent.revoked_at is not None
    (event,) = AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED, client_id=public_app.client_id)
    assert event.user == user
    assert event.detail == {
        "reason": "revoked on the connected apps page",
        "user_id": str(user.pk),
        "client_id": public_app.client_id,
        "tokens": 2,
        "consents": 1,
    }


def test_another_users_client_or_an_unknown_action_changes_nothing(user, other_user, public_app, resource, mint_token):
    access, _ = authorize(other_user, public_app, resource, mint_token)
    browser = signed_in(user)
    refused = browser.post(PAGE, {"action": "revoke", "client_id": public_app.client_id})
    assert refused.status_code == 400
    assert "that application is not connected to your account" in refused.content.decode()
    unknown = browser.post(PAGE, {"action": "delete", "client_id": public_app.client_id})
    assert unknown.status_code == 400 and "the form did not say what to do" in unknown.content.decode()
    missing = browser.post(PAGE, {})
    assert missing.status_code == 400
    assert mcp_status(access) == 200
    assert Consent.objects.get(user=other_user).revoked_at is None
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED).exists()


def test_post_needs_the_csrf_token(user, public_app, resource, mint_token):
    access, _ = authorize(user, public_app, resource, mint_token)
    browser = signed_in(user, enforce_csrf_checks=True)
    assert browser.post(PAGE, {"action": "revoke", "client_id": public_app.client_id}).status_code == 403
    assert mcp_status(access) == 200


def test_revoke_user_grants_for_all_clients_leaves_other_users_alone(
    user, other_user, public_app, cimd_app, resource, mint_token
):
    mine = [authorize(user, app, resource, mint_token)[0] for app in (public_app, cimd_app)]
    theirs, _ = authorize(other_user, public_app, resource, mint_token)
    assert revoke_user_grants(user, reason="account closed") == 4
    assert [mcp_status(token) for token in mine] == [401, 401]
    assert mcp_status(theirs) == 200
    assert not Consent.objects.filter(user=user, revoked_at__isnull=True).exists()
    (event,) = AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANTS_REVOKED, user=user)
    assert event.detail == {
        "reason": "account closed",
        "user_id": str(user.pk),
        "client_id": None,
        "tokens": 4,
        "consents": 2,
    }
    assert user_grants(user) == []
    assert revoke_user_grants(user, reason="again") == 0


def test_clients_sharing_a_name_or_a_short_client_id_are_told_apart(user, db):
    Application = get_application_model()

    def app(name: str, client_id: str, redirect_uris: str):
        return Application.objects.create(
            name=name,
            client_id=client_id,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=redirect_uris,
        )

    twins = [
        app("Desk  Helper", "SameStart" + "a" * 31, "https://one.example/cb https://one.example/other"),
        app("desk helper", "SameStart" + "b" * 31, "http://127.0.0.1/cb https://two.example/cb"),
    ]
    alone = app("Notes", "Different" + "c" * 31, "https://notes.example/cb")
    for application in (*twins, alone):
        Consent.record_grant(user, application, ["mcp"], "https://rs.example/mcp")

    grants = {grant.application.pk: grant for grant in user_grants(user)}
    one, two, notes = grants[twins[0].pk], grants[twins[1].pk], grants[alone.pk]
    assert one.same_name and two.same_name and not notes.same_name
    # Their first 8 characters are equal: shown in full; a short form that is unique stays short.
    assert (one.client_id_short, two.client_id_short) == (twins[0].client_id, twins[1].client_id)
    assert notes.client_id_short == "Differen…"
    assert one.redirect_hosts == ("one.example",) and two.redirect_hosts == ("127.0.0.1", "two.example")
    assert one.registered_at == twins[0].created


def test_each_connection_shows_its_organization(user, public_app, resource):
    acme = Organization.objects.create(slug="acme", name="Acme Corp")
    globex = Organization.objects.create(slug="globex", name="Globex")
    Consent.record_grant(user, public_app, ["mcp"], resource.uri, acme)
    Consent.record_grant(user, public_app, ["mcp"], resource.uri, globex)
    Consent.record_grant(user, public_app, ["mcp"], resource.uri)
    grants = user_grants(user)
    assert sorted(str(grant.organization) for grant in grants) == ["Acme Corp", "Globex", "None"]
    assert not any(grant.same_name for grant in grants)  # one application, three connections
    html = signed_in(user).get(PAGE).content.decode()
    assert html.count('class="grant-organization"') == 2
    assert '<dd class="grant-organization" data-organization="acme">Acme Corp</dd>' in html
    assert '<dd class="grant-organization" data-organization="globex">Globex</dd>' in html


def test_revoking_one_organizations_connection_keeps_the_others(user, public_app, resource):
    """The same client connected for Acme and for Globex: revoking Acme's leaves Globex's tokens working."""
    acme = Organization.objects.create(slug="acme", name="Acme Corp")
    globex = Organization.objects.create(slug="globex", name="Globex")
    for organization in (acme, globex):
        OrganizationMembership.objects.create(organization=organization, user=user)
    browser = signed_in(user)
    pairs = {}
    for organization in (acme, globex):
        code, verifier = code_for(browser, public_app, organization)
        pairs[organization.slug] = token_request(browser, public_app, code, verifier).json()
    response = browser.post(PAGE, {"action": "revoke", "client_id": public_app.client_id, "organization": str(acme.pk)})
    assert response.status_code == 303
    live = set(get_access_token_model().objects.values_list("token_checksum", flat=True))
    assert checksum(pairs["acme"]["access_token"]) not in live
    assert checksum(pairs["globex"]["access_token"]) in live
    refresh = get_refresh_token_model().objects.get(token_checksum=checksum(pairs["globex"]["refresh_token"]))
    assert refresh.revoked is None
    assert list(Consent.objects.filter(revoked_at__isnull=True).values_list("organization__slug", flat=True)) == [
        "globex"
    ]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANTS_REVOKED)
    assert event.organization == acme and event.detail["organization"] == "acme" and event.detail["tokens"] == 2
    # An organization the client is not connected for changes nothing.
    again = browser.post(PAGE, {"action": "revoke", "client_id": public_app.client_id, "organization": str(acme.pk)})
    assert again.status_code == 400
    tampered = browser.post(PAGE, {"action": "revoke", "client_id": public_app.client_id, "organization": "x"})
    assert tampered.status_code == 400
