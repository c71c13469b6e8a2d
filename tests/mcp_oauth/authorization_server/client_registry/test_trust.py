"""The trust policy: rule evaluation, and its enforcement at registration, authorization and token time."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.template.loader import render_to_string
from oauth2_provider.models import get_access_token_model, get_application_model, get_grant_model

from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.authorization_server.views import describe_client
from mcp_oauth.models import AuditEvent, TrustRule
from mcp_oauth.models.trust import normalize_pattern
from tests.support.oauth_helpers import authorize_params, get_code, hidden_fields, pkce_pair, token_request

pytestmark = pytest.mark.django_db

Application = get_application_model()
CIMD_URL = "https://client.example.com/oauth/client.json"


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()  # throttling counters of other tests
    yield


def rule(target, pattern, action, source="", enabled=True):
    return TrustRule.objects.create(
        target=target, pattern=pattern, action=action, registration_source=source, enabled=enabled
    )


def deny(target, pattern, **kw):
    return rule(target, pattern, TrustRule.Action.DENY, **kw)


def allow(target, pattern, **kw):
    return rule(target, pattern, TrustRule.Action.ALLOW, **kw)


def review(target, pattern, **kw):
    return rule(target, pattern, TrustRule.Action.REVIEW, **kw)


HOST = TrustRule.Target.CLIENT_ID_HOST
REDIRECT = TrustRule.Target.REDIRECT_HOST
CLIENT = TrustRule.Target.CLIENT


def decide(source="dcr", client_id="", redirect_uris=("http://127.0.0.1/cb",), mode=None):
    return trust.evaluate(client_id=client_id, redirect_uris=redirect_uris, registration_source=source, mode=mode)


# --- evaluation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "source", "expected"),
    [
        ("open", "dcr", "unknown"),
        ("open", "cimd", "unknown"),
        ("open", "manual", "trusted"),
        ("allowlist", "dcr", "denied"),
        ("allowlist", "cimd", "denied"),
        ("allowlist", "manual", "trusted"),
        ("review", "dcr", "review"),
        ("review", "cimd", "review"),
        ("review", "manual", "trusted"),
    ],
)
def test_mode_decides_when_no_rule_matches(mode, source, expected):
    client_id = CIMD_URL if source == "cimd" else "abc"
    verdict = decide(source, client_id, mode=mode)
    assert verdict.decision == expected
    assert verdict.allowed is (expected in ("trusted", "unknown"))


def test_mode_comes_from_settings_and_fails_closed_on_nonsense(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "review"}
    assert decide().decision == "review"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "everything-goes"}
    assert decide().decision == "denied"


def test_deny_wins_over_everything():
    allow(CLIENT, "abc")
    allow(REDIRECT, "127.0.0.1")
    deny(REDIRECT, "evil.example")
    verdict = decide(client_id="abc", redirect_uris=["http://127.0.0.1/cb", "https://evil.example/cb"])
    assert verdict.decision == "denied"
    assert "evil.example" in verdict.reason and verdict.rule_id is not None
    # and a manual client is not above a deny rule
    assert decide("manual", "abc", ["https://evil.example/cb"]).decision == "denied"


def test_client_rule_beats_host_review():
    review(REDIRECT, "*", source="dcr")
    assert decide(client_id="abc").decision == "review"
    allow(CLIENT, "abc")
    assert decide(client_id="abc").decision == "trusted"
    assert decide(client_id="other").decision == "review"


def test_client_rule_can_hold_an_admin_registered_client():
    review(CLIENT, "abc")
    assert decide("manual", "abc").decision == "review"


def test_most_specific_host_rule_counts():
    review(HOST, "*")
    allow(HOST, "*.example.com")
    assert decide("cimd", CIMD_URL, mode="allowlist").decision == "trusted"
    review(HOST, "client.example.com")
    assert decide("cimd", CIMD_URL, mode="allowlist").decision == "review"
    assert decide("cimd", "https://other.example.com/c.json", mode="allowlist").decision == "trusted"
    assert decide("cimd", "https://elsewhere.org/c.json", mode="open").decision == "review"


@pytest.mark.parametrize(
    ("host", "matches"),
    [
        ("example.com", True),
        ("client.example.com", True),
        ("a.b.example.com", True),
        ("CLIENT.Example.COM", True),
        ("badexample.com", False),
        ("example.com.evil.org", False),
    ],
)
def test_suffix_pattern_covers_the_domain_and_its_subdomains(host, matches):
    allow(HOST, "*.example.com")
    verdict = decide("cimd", f"https://{host}/client.json", mode="allowlist")
    assert (verdict.decision == "trusted") is matches


def test_cimd_identity_is_its_client_id_host_not_its_redirects():
    allow(REDIRECT, "127.0.0.1")
    assert decide("cimd", CIMD_URL, mode="allowlist").decision == "denied"
    assert decide("dcr", "abc", mode="allowlist").decision == "trusted"


def test_dynamic_client_needs_every_redirect_host_allowed():
    allow(REDIRECT, "app.example.com")
    uris = ["https://app.example.com/cb", "https://other.example.net/cb"]
    assert decide("dcr", "abc", uris, mode="allowlist").decision == "denied"
    assert decide("dcr", "abc", uris[:1], mode="allowlist").decision == "trusted"


def test_rule_limited_to_a_registration_source():
    deny(REDIRECT, "*", source="dcr")
    assert decide("dcr").decision == "denied"
    assert decide("cimd", CIMD_URL).decision == "unknown"
    assert decide("manual", "abc").decision == "trusted"


def test_disabled_rule_is_ignored():
    deny(REDIRECT, "127.0.0.1", enabled=False)
    assert decide().decision == "unknown"


@pytest.mark.parametrize("uri", ["http://[::1", "not a uri", "", "https://", "https://exa mple.com/cb", "\x00"])
def test_garbage_redirect_uris_never_raise(uri):
    deny(REDIRECT, "*.example.com")
    assert decide("dcr", "abc", [uri], mode="allowlist").decision == "denied"  # no host: not allowed
    assert decide("dcr", "abc", [uri], mode="open").decision == "unknown"


@pytest.mark.parametrize(
    ("target", "pattern", "stored"),
    [
        (HOST, "Client.EXAMPLE.com.", "client.example.com"),
        (HOST, "*.Example.com", "*.example.com"),
        (HOST, "*", "*"),
        (REDIRECT, "127.0.0.1", "127.0.0.1"),
        (REDIRECT, "[::1]", "::1"),
        (HOST, "bücher.example", "xn--bcher-kva.example"),
        (CLIENT, " abc-123 ", "abc-123"),
        (CLIENT, CIMD_URL, CIMD_URL),
    ],
)
def test_patterns_are_normalized(target, pattern, stored):
    assert normalize_pattern(target, pattern) == stored
    assert rule(target, pattern, "allow").pattern == stored


@pytest.mark.parametrize(
    ("target", "pattern"),
    [
        (HOST, ""),
        (HOST, "*."),
        (HOST, "a b.com"),
        (HOST, "*.1.2.3.4"),
        (HOST, "exa*mple.com"),
        (HOST, "https://example.com"),
        (REDIRECT, "example.com/path"),
        (CLIENT, "two words"),
        (CLIENT, ""),
    ],
)
def test_bad_patterns_are_refused(target, pattern):
    with pytest.raises(ValidationError):
        TrustRule(target=target, pattern=pattern, action="deny").full_clean()


def test_one_rule_per_target_pattern_and_source():
    from django.db import IntegrityError, transaction

    deny(HOST, "evil.example")
    with pytest.raises(IntegrityError), transaction.atomic():
        allow(HOST, "EVIL.example")
    allow(HOST, "evil.example", source="dcr")  # another source: another key


# --- DOT permission classes -----------------------------------------------------------------


def test_cimd_permission_refuses_denied_host_before_any_fetch():
    permission = trust.TrustPolicyCIMDPermission()
    assert permission.has_permission(None, CIMD_URL) is True
    deny(HOST, "*.example.com")
    assert permission.has_permission(None, CIMD_URL) is False
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TRUST_DENIED)
    assert event.client_id == CIMD_URL and event.detail["stage"] == "cimd"
    assert event.detail["client_id_host"] == "client.example.com"


def test_cimd_permission_lets_review_through_and_allowlist_decides(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "review"}
    assert trust.TrustPolicyCIMDPermission().has_permission(None, CIMD_URL) is True  # fetched, then held
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "allowlist"}
    assert trust.TrustPolicyCIMDPermission().has_permission(None, CIMD_URL) is False
    allow(HOST, "client.example.com")
    assert trust.TrustPolicyCIMDPermission().has_permission(None, CIMD_URL) is True


def test_default_settings_install_the_permission_classes():
    from oauth2_provider.settings import oauth2_settings

    assert trust.TrustPolicyCIMDPermission in oauth2_settings.CIMD_REGISTRATION_PERMISSION_CLASSES
    assert trust.TrustPolicyDCRPermission in oauth2_settings.DCR_REGISTRATION_PERMISSION_CLASSES


# --- dynamic registration -------------------------------------------------------------------


def register(client, redirect_uris=("http://127.0.0.1/callback",), **extra):
    body = {
        "client_name": "Dyn",
        "redirect_uris": list(redirect_uris),
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
        **extra,
    }
    return client.post("/oauth/register", json.dumps(body), content_type="application/json")


def test_registration_denied_by_redirect_host_rule(client):
    deny(REDIRECT, "evil.example")
    response = register(client, ["http://127.0.0.1/cb", "https://evil.example/cb"])
    assert response.status_code == 400  # RFC 7591 §3.2.2
    assert response.json()["error"] == "invalid_redirect_uri"
    assert response.json()["error_description"].startswith("redirect_uris: ")
    assert response["Cache-Control"] == "no-store"
    assert not Application.objects.exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TRUST_DENIED)
    assert event.detail["stage"] == "registration" and "evil.example" in event.detail["redirect_hosts"]


def test_registration_in_allowlist_mode_needs_an_allow_rule(client, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "allowlist"}
    refused = register(client)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_redirect_uri"
    allow(REDIRECT, "127.0.0.1", source="dcr")
    response = register(client)
    assert response.status_code == 201, response.content
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CLIENT_REGISTERED)
    assert event.detail["verdict"] == "trusted"


def test_registration_update_cannot_move_to_a_denied_host(client):
    """RFC 7592 PUT: the new redirect URIs pass the policy too, once the registration token is verified."""
    registered = register(client).json()
    deny(REDIRECT, "evil.example")
    body = {
        "client_id": registered["client_id"],
        "redirect_uris": ["https://evil.example/cb"],
        "token_endpoint_auth_method": "none",
        "grant_types": ["authorization_code", "refresh_token"],
    }
    path = f"/oauth/register/{registered['client_id']}"
    anonymous = client.put(path, json.dumps(body), content_type="application/json")
    assert anonymous.status_code == 401  # no token: no policy verdict, no audit event
    assert anonymous.json()["error"] == "invalid_token" and anonymous["WWW-Authenticate"].startswith("Bearer ")
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.TRUST_DENIED).exists()
    response = client.put(
        path,
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {registered['registration_access_token']}",
    )
    assert response.status_code == 400 and response.json()["error"] == "invalid_redirect_uri"
    assert Application.objects.get(client_id=registered["client_id"]).redirect_uris == "http://127.0.0.1/callback"
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.TRUST_DENIED).detail["stage"] == "registration update"


def test_malformed_registration_still_gets_its_metadata_error(client):
    deny(REDIRECT, "*")
    response = client.post("/oauth/register", b"[1, 2]", content_type="application/json")
    assert response.status_code == 400 and response.json()["error"] == "invalid_client_metadata"


# --- authorization ---------------------------------------------------------------------------


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


def authorize_url(app, **extra):
    _, challenge = pkce_pair()
    return "/oauth/authorize?" + urlencode(authorize_params(app, challenge, **extra))


def assert_error_page(response, error="access_denied", status=403):
    assert response.status_code == status, response.content[:300]
    assert "Location" not in response
    html = response.content.decode()
    assert f'id="error-code">{error}<' in html
    assert response["X-Frame-Options"] == "DENY"
    return html


def test_review_mode_holds_a_dynamic_client_until_trusted(logged_in, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "review"}
    response = register(logged_in)
    assert response.status_code == 201  # registration is accepted ...
    app = Application.objects.get(client_id=response.json()["client_id"])
    html = assert_error_page(logged_in.get(authorize_url(app)))  # ... but it cannot be authorized
    assert "waiting for approval" in html
    assert not get_grant_model().objects.exists()
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TRUST_DENIED).get()
    assert event.detail == {**event.detail, "stage": "authorization", "verdict": "review"}
    assert event.user is not None and event.client_id == app.client_id

    allow(CLIENT, app.client_id)
    page = logged_in.get(authorize_url(app))
    assert page.status_code == 200
    assert 'data-trust="trusted"' in page.content.decode()


def test_denied_client_gets_an_error_page_even_for_a_request_that_would_be_redirected(logged_in, public_app):
    deny(REDIRECT, "client.example.com")
    # an invalid scope would normally be redirected back to the client with error=invalid_scope
    html = assert_error_page(logged_in.get(authorize_url(public_app, scope="nonexistent")))
    assert "not allowed to connect" in html


def test_consent_post_after_the_client_was_blocked(logged_in, public_app):
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge)
    forms = [hidden_fields(logged_in.get("/oauth/authorize?" + urlencode(params)).content.decode()) for _ in range(2)]
    deny(CLIENT, public_app.client_id)
    # neither Authorize nor Cancel goes back to the client
    for form, answer in zip(forms, ({"allow": "Authorize"}, {}), strict=False):
        response = logged_in.post("/oauth/authorize?" + urlencode(params), {**form, **answer})
        assert_error_page(response)
    assert not get_grant_model().objects.exists()


def test_consent_page_shows_the_verdict(logged_in, public_app):
    public_app.registration_source = "dcr"
    public_app.save()
    html = logged_in.get(authorize_url(public_app)).content.decode()
    assert 'data-trust="unknown"' in html and "has not verified" in html
    public_app.registration_source = "manual"
    public_app.save()
    html = logged_in.get(authorize_url(public_app)).content.decode()
    assert 'data-trust="trusted"' in html


def test_consent_page_names_the_cimd_host_and_warns_for_loopback():
    app = Application(
        client_id=CIMD_URL,
        name="Evil Twin",
        registration_source="cimd",
        redirect_uris="http://127.0.0.1/cb http://localhost:9/cb",
    )
    client = describe_client(app)
    assert client["trust"] == "unknown" and client["client_id_host"] == "client.example.com"
    html = render_to_string("mcp_oauth/authorize.html", {"client": client, "redirect_host": "127.0.0.1"})
    assert 'id="client-id-host-banner">client.example.com<' in html
    assert 'data-trust="unknown"' in html and "what <strong>client.example.com</strong> says" in html
    assert 'id="loopback-warning"' in html


def test_cimd_client_id_on_a_denied_host_is_refused_before_any_fetch(logged_in, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_ENABLED": True}
    deny(HOST, "*.example.com")
    response = logged_in.get(
        "/oauth/authorize?" + urlencode({**authorize_params(Application(client_id=CIMD_URL), pkce_pair()[1])})
    )
    assert_error_page(response)
    assert not Application.objects.exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TRUST_DENIED)
    assert event.client_id == CIMD_URL and event.detail["client_id_host"] == "client.example.com"


def test_unknown_client_is_still_invalid_client(logged_in):
    deny(REDIRECT, "*")
    response = logged_in.get(authorize_url(Application(client_id="no-such-client")))
    assert response.status_code == 400 and "Location" not in response
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.TRUST_DENIED).exists()


# --- token endpoint --------------------------------------------------------------------------


def test_code_of_a_client_blocked_meanwhile_is_refused(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    deny(REDIRECT, "client.example.com")
    response = token_request(logged_in, public_app, code, verifier)
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "invalid_client"
    assert response["Cache-Control"] == "no-store"
    assert not get_access_token_model().objects.exists()
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TRUST_DENIED)
    assert event.detail["stage"] == "token" and event.client_id == public_app.client_id


def test_refresh_of_a_client_held_for_review_is_refused(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    tokens = token_request(logged_in, public_app, code, verifier).json()
    review(CLIENT, public_app.client_id)
    response = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 401 and response.json()["error"] == "invalid_client"
    TrustRule.objects.all().delete()
    response = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 200, response.content


def test_blocked_client_may_still_revoke_its_token(logged_in, public_app):
    code, verifier, _ = get_code(logged_in, public_app)
    tokens = token_request(logged_in, public_app, code, verifier).json()
    deny(CLIENT, public_app.client_id)
    response = logged_in.post("/oauth/revoke", {"token": tokens["access_token"], "client_id": public_app.client_id})
    assert response.status_code == 200
    assert not get_access_token_model().objects.exists()


def test_trusted_flow_unchanged(logged_in, public_app):
    allow(CLIENT, public_app.client_id)
    code, verifier, query = get_code(logged_in, public_app)
    assert query["iss"] == "http://testserver"
    assert token_request(logged_in, public_app, code, verifier).status_code == 200
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.TRUST_DENIED).exists()


# --- system checks ---------------------------------------------------------------------------


def test_checks_report_a_bad_mode_and_a_policy_left_out(settings):
    from mcp_oauth.checks import check_trust_and_throttling

    assert check_trust_and_throttling(None) == []
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TRUST_MODE": "lax"}
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.cimd.AllowAllCIMDPermission",),
    }
    ids = sorted(message.id for message in check_trust_and_throttling(None))
    assert ids == ["mcp_oauth.E030", "mcp_oauth.W031"]
