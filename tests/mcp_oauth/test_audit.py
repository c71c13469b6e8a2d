"""The audit log: every event kind is written by the flow that triggers it, never with a secret in it.

(``cimd.fetch_failed`` and ``cimd.ssrf_refused`` are written and tested by the CIMD fetcher.)
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from mcp_oauth.audit import MAX_DETAIL_STRING, audit_event, record
from mcp_oauth.models import AuditEvent, ClientProfile, Consent, TrustRule
from tests.support.oauth_helpers import authorize_params, consent, get_code, pkce_pair, redirect_query, token_request

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind
RESOURCE = "http://testserver/mcp"


@pytest.fixture
def logged_in(client, user, resource, public_app):
    client.force_login(user)
    return client


@pytest.fixture
def events():
    """Every audit event sent through the ``audit_event`` signal during the test."""
    seen = []

    def receiver(sender, event, **kwargs):
        seen.append(event)

    audit_event.connect(receiver, dispatch_uid="test-audit-receiver")
    yield seen
    audit_event.disconnect(dispatch_uid="test-audit-receiver")


def only(kind):
    return AuditEvent.objects.get(kind=kind)


def assert_no_secret(*secrets):
    """No audit row (client_id or detail) holds any of ``secrets``."""
    for event in AuditEvent.objects.all():
        blob = json.dumps(event.detail) + event.client_id
        for secret in secrets:
            assert secret not in blob, (event.kind, secret)


def test_consent_granted_and_denied(logged_in, user, public_app, events):
    get_code(logged_in, public_app, resource=RESOURCE)
    granted = only(Kind.CONSENT_GRANTED)
    assert granted.user == user and granted.client_id == public_app.client_id
    assert granted.detail["scope"] == "mcp" and granted.detail["resource"] == RESOURCE
    assert granted.ip_address == "127.0.0.1"
    consent_row = Consent.objects.get(user=user, application=public_app)
    assert consent_row.scope == "mcp" and consent_row.resources == [RESOURCE] and consent_row.revoked_at is None

    _, challenge = pkce_pair()
    assert (
        redirect_query(consent(logged_in, authorize_params(public_app, challenge), allow=False))["error"]
        == "access_denied"
    )
    denied = only(Kind.CONSENT_DENIED)
    assert denied.user == user and denied.client_id == public_app.client_id
    assert [e.kind for e in events] == [Kind.CONSENT_GRANTED, Kind.CONSENT_DENIED]


def test_automatic_approval_is_a_consent_too(logged_in, public_app):
    public_app.skip_authorization = True
    public_app.save()
    _, challenge = pkce_pair()
    response = logged_in.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert "code" in redirect_query(response)
    assert only(Kind.CONSENT_GRANTED).detail["automatic"] is True


def test_token_issued_refreshed_and_last_used(logged_in, user, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    assert not ClientProfile.objects.filter(application=public_app, last_used_at__isnull=False).exists()
    tokens = token_request(logged_in, public_app, code, verifier).json()
    issued = only(Kind.TOKEN_ISSUED)
    assert issued.user == user and issued.client_id == public_app.client_id
    assert issued.detail["grant_type"] == "authorization_code" and issued.detail["resource"] == [RESOURCE]
    first_use = ClientProfile.objects.get(application=public_app).last_used_at
    assert first_use is not None

    response = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 200
    refreshed = only(Kind.TOKEN_REFRESHED)
    assert refreshed.user == user and refreshed.detail["grant_type"] == "refresh_token"
    assert ClientProfile.objects.get(application=public_app).last_used_at >= first_use
    assert_no_secret(code, verifier, tokens["access_token"], tokens["refresh_token"], response.json()["access_token"])


def test_client_credentials_token_issued(client, resource):
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    app = Application(name="svc", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    response = client.post(
        "/oauth/token", {"grant_type": "client_credentials", "client_id": app.client_id, "client_secret": secret}
    )
    assert response.status_code == 200, response.content
    event = only(Kind.TOKEN_ISSUED)
    assert event.user is None and event.detail["grant_type"] == "client_credentials"
    assert_no_secret(secret, response.json()["access_token"])


def test_token_revoked_through_the_revocation_endpoint(logged_in, user, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    tokens = token_request(logged_in, public_app, code, verifier).json()
    response = logged_in.post("/oauth/revoke", {"token": tokens["refresh_token"], "client_id": public_app.client_id})
    assert response.status_code == 200
    event = only(Kind.TOKEN_REVOKED)
    assert event.user == user and event.detail["token_type"] == "refresh_token"
    assert event.detail["via"] == "revocation_endpoint"
    # an unknown or already revoked token is answered 200 (RFC 7009 §2.2) but is no event
    logged_in.post("/oauth/revoke", {"token": "not-a-token", "client_id": public_app.client_id})
    logged_in.post("/oauth/revoke", {"token": tokens["refresh_token"], "client_id": public_app.client_id})
    assert AuditEvent.objects.filter(kind=Kind.TOKEN_REVOKED).count() == 1
    assert_no_secret(tokens["access_token"], tokens["refresh_token"])


def test_refresh_token_reuse_detected(logged_in, user, public_app):
    from datetime import timedelta

    from django.utils import timezone

    from mcp_oauth.models import RefreshGeneration

    code, verifier, _ = get_code(logged_in, public_app)
    first = token_request(logged_in, public_app, code, verifier).json()
    refresh = {"grant_type": "refresh_token", "client_id": public_app.client_id}
    second = logged_in.post("/oauth/token", {**refresh, "refresh_token": first["refresh_token"]}).json()
    assert not AuditEvent.objects.filter(kind=Kind.REFRESH_TOKEN_REUSE).exists()
    # past the grace window of the rotation (REFRESH_TOKEN_GRACE_SECONDS, 60 s)
    RefreshGeneration.objects.filter(rotated_at__isnull=False).update(rotated_at=timezone.now() - timedelta(seconds=61))
    replay = logged_in.post("/oauth/token", {**refresh, "refresh_token": first["refresh_token"]})
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    event = only(Kind.REFRESH_TOKEN_REUSE)
    assert event.user == user and event.client_id == public_app.client_id and event.detail["family_revoked"] is True
    # the family is revoked: the newest refresh token is dead as well
    assert not get_refresh_token_model().objects.filter(revoked__isnull=True).exists()
    assert_no_secret(first["refresh_token"], second["refresh_token"])


def test_unknown_refresh_token_is_not_reuse(logged_in, public_app):
    response = logged_in.post(
        "/oauth/token", {"grant_type": "refresh_token", "refresh_token": "made-up", "client_id": public_app.client_id}
    )
    assert response.status_code == 400
    assert not AuditEvent.objects.filter(kind=Kind.REFRESH_TOKEN_REUSE).exists()


def test_authorization_code_replay(logged_in, user, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    assert token_request(logged_in, public_app, code, verifier).status_code == 200
    assert token_request(logged_in, public_app, code, verifier).status_code == 400
    event = only(Kind.CODE_REPLAY)
    assert event.client_id == public_app.client_id and event.user == user
    assert event.detail["tokens_revoked"] is True and event.ip_address == "127.0.0.1"
    assert not get_access_token_model().objects.exists()
    assert_no_secret(code, verifier)


def test_invalid_resource_at_authorize_and_token(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, resource="https://evil.example/mcp")
    assert redirect_query(logged_in.get("/oauth/authorize?" + urlencode(params)))["error"] == "invalid_target"
    event = only(Kind.INVALID_RESOURCE)
    assert event.detail["endpoint"] == "authorization" and event.detail["resource"] == ["https://evil.example/mcp"]

    code, verifier, _ = get_code(logged_in, public_app)
    response = token_request(logged_in, public_app, code, verifier, resource="https://evil.example/other")
    assert response.json()["error"] == "invalid_target"
    event = AuditEvent.objects.filter(kind=Kind.INVALID_RESOURCE).order_by("-id").first()
    assert event.detail["endpoint"] == "token" and event.client_id == public_app.client_id
    assert_no_secret(code, verifier)


def test_dynamic_registration(client, resource):
    body = {"client_name": "Dyn", "redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}
    response = client.post("/oauth/register", json.dumps(body), content_type="application/json")
    assert response.status_code == 201
    event = only(Kind.CLIENT_REGISTERED)
    assert event.client_id == response.json()["client_id"] and event.ip_address == "127.0.0.1"
    assert event.detail["client_name"] == "Dyn" and event.detail["verdict"] == "unknown"
    assert event.detail["redirect_hosts"] == ["127.0.0.1"]
    assert_no_secret(response.json()["registration_access_token"])


def test_confidential_registration_never_logs_its_secret(client, admin_user):
    client.force_login(admin_user)
    body = {"client_name": "Conf", "redirect_uris": ["https://app.example.com/cb"]}
    response = client.post("/oauth/register", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    assert "client_secret" in response.json()
    assert only(Kind.CLIENT_REGISTERED).user == admin_user
    assert_no_secret(response.json()["client_secret"], response.json()["registration_access_token"])


def test_trust_policy_denial(client, resource):
    TrustRule.objects.create(target="redirect_host", pattern="evil.example", action="deny")
    body = {"redirect_uris": ["https://evil.example/cb"], "token_endpoint_auth_method": "none"}
    assert client.post("/oauth/register", json.dumps(body), content_type="application/json").status_code == 400
    event = only(Kind.TRUST_DENIED)
    assert event.detail["verdict"] == "denied" and event.detail["stage"] == "registration"


# --- record() itself ----------------------------------------------------------------------


def test_record_drops_secrets_at_any_depth_and_cleans_text(user):
    event = record(
        Kind.TOKEN_ISSUED,
        user=user,
        client_id="cli\x00ent",
        detail={
            "access_token": "AT",
            "Refresh_Token": "RT",
            "nested": {"client_secret": "S", "ok": "fine", "list": [{"code": "C"}]},
            "long": "x" * 5000,
            "nul": "a\x00b",
            "surrogate": "a\ud800b",
            "many": list(range(100)),
        },
    )
    event.refresh_from_db()
    assert event.client_id == "client"
    assert "access_token" not in event.detail and "Refresh_Token" not in event.detail
    assert event.detail["nested"] == {"ok": "fine", "list": [{}]}
    assert len(event.detail["long"]) == MAX_DETAIL_STRING
    assert event.detail["nul"] == "ab" and event.detail["surrogate"] == "ab"
    assert len(event.detail["many"]) == 20


def test_record_takes_the_ip_of_an_oauthlib_request_and_refuses_unknown_kinds():
    fake = SimpleNamespace(headers={"REMOTE_ADDR": "2001:db8::1"})
    assert record(Kind.TOKEN_ISSUED, request=fake).ip_address == "2001:db8::1"
    assert record(Kind.TOKEN_ISSUED, request=SimpleNamespace(META={"REMOTE_ADDR": "garbage"})).ip_address is None
    with pytest.raises(ValueError):
        record("token.stolen")
