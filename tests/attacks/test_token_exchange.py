"""Hostile token exchange requests (RFC 8693): each answered with the error RFC 8693 §2.2.2 / RFC 6749
§5.2 names, never a 500, never a token, never a half-written record (also on PostgreSQL)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.token_exchange.decision import ACCESS_TOKEN_TYPE
from mcp_oauth.models import AuditEvent, Organization, OrganizationMembership, ProtectedResource, TokenActor
from mcp_oauth.resource_server.cache import token_checksum
from tests.mcp_oauth.dpop.test_proof import TOKEN_URL
from tests.support.dpop_helpers import DPoPKey
from tests.support.oauth_helpers import REDIRECT_URI, get_code
from tests.support.token_exchange_helpers import API_URI, allowing_adapter, api_resource, exchange, subject_pair

pytestmark = pytest.mark.django_db

REFRESH_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:refresh_token"


@pytest.fixture
def logged_in(client, user, resource):
    api_resource()
    client.force_login(user)
    return client


@pytest.fixture
def subject(logged_in, public_app) -> dict:
    return subject_pair(logged_in, public_app)


def refused(response, error: str, status: int = 400) -> None:
    """The exchange was refused with ``error`` and no token was issued."""
    assert response.status_code == status, response.content
    body = response.json()
    assert body["error"] == error, body
    assert "access_token" not in body
    assert response["Cache-Control"] == "no-store"
    assert not TokenActor.objects.exists()


def access_token_count() -> int:
    return get_access_token_model().objects.count()


def test_wider_scope_is_invalid_scope(logged_in, public_app, subject, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter()}
    before = access_token_count()
    refused(exchange(logged_in, public_app, subject["access_token"], scope="profile admin"), "invalid_scope")
    refused(exchange(logged_in, public_app, subject["access_token"], scope="offline_access"), "invalid_scope")
    narrow = subject_pair(logged_in, public_app, scope="mcp")
    refused(exchange(logged_in, public_app, narrow["access_token"], scope="profile"), "invalid_scope")
    assert access_token_count() == before + 1  # the narrow subject alone
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_EXCHANGE_REFUSED).latest("id")
    assert event.detail["error"] == "invalid_scope"


@pytest.mark.parametrize(
    "target",
    [
        "https://elsewhere.example/api",  # not ours
        "http://testserver/not-a-resource",  # our origin, no such resource
        "http://testserver/api#frag",  # not a resource indicator (RFC 8707 §2)
        "urn:example:api",  # not an absolute http(s) URI
    ],
)
def test_foreign_resource_is_invalid_target(logged_in, public_app, subject, target):
    refused(exchange(logged_in, public_app, subject["access_token"], resource=target), "invalid_target")
    refused(exchange(logged_in, public_app, subject["access_token"], resource=None, audience=target), "invalid_target")


def test_resource_and_audience_must_agree(logged_in, public_app, subject):
    response = exchange(logged_in, public_app, subject["access_token"], audience="http://testserver/mcp")
    refused(response, "invalid_target")


def test_two_resources_are_invalid_target(logged_in, public_app, subject):
    response = logged_in.post(
        "/oauth/token",
        {
            "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
            "client_id": public_app.client_id,
            "subject_token": subject["access_token"],
            "subject_token_type": ACCESS_TOKEN_TYPE,
            "resource": [API_URI, "http://testserver/mcp"],
        },
    )
    refused(response, "invalid_target")


def test_disabled_resource_is_invalid_target(logged_in, public_app, subject):
    ProtectedResource.objects.filter(uri=API_URI).update(enabled=False)
    from mcp_oauth.resource_server.cache import bump_resource_generation

    bump_resource_generation()
    refused(exchange(logged_in, public_app, subject["access_token"]), "invalid_target")


def test_another_clients_subject_token_is_invalid_grant(logged_in, public_app, subject):
    Application = get_application_model()
    thief = Application.objects.create(
        name="thief",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
    )
    refused(exchange(logged_in, thief, subject["access_token"]), "invalid_grant")


def test_revoked_subject_token_is_invalid_grant(logged_in, public_app, subject):
    revoked = logged_in.post("/oauth/revoke", {"token": subject["access_token"], "client_id": public_app.client_id})
    assert revoked.status_code == 200
    refused(exchange(logged_in, public_app, subject["access_token"]), "invalid_grant")


def test_expired_subject_token_is_invalid_grant(logged_in, public_app, subject):
    get_access_token_model().objects.filter(token_checksum=token_checksum(subject["access_token"])).update(
        expires=timezone.now() - timedelta(seconds=1)
    )
    refused(exchange(logged_in, public_app, subject["access_token"]), "invalid_grant")


def test_unknown_subject_token_is_invalid_grant(logged_in, public_app):
    refused(exchange(logged_in, public_app, "x" * 43), "invalid_grant")


def test_refresh_token_as_subject(logged_in, public_app, subject):
    # as an access token: not one of ours
    refused(exchange(logged_in, public_app, subject["refresh_token"]), "invalid_grant")
    # as a refresh token: a type this server does not exchange
    refused(
        exchange(logged_in, public_app, subject["refresh_token"], subject_token_type=REFRESH_TOKEN_TYPE),
        "invalid_request",
    )


def test_registration_access_token_as_subject(client, resource):
    registered = client.post(
        "/oauth/register",
        data='{"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"}',
        content_type="application/json",
    )
    assert registered.status_code == 201, registered.content
    body = registered.json()
    app = get_application_model().objects.get(client_id=body["client_id"])
    refused(exchange(client, app, body["registration_access_token"]), "invalid_grant")


def dpop_subject(client, app, key: DPoPKey) -> dict:
    code, verifier, _ = get_code(client, app, scope="mcp profile")
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": app.client_id,
        "code_verifier": verifier,
    }
    body = client.post("/oauth/token", data, HTTP_DPOP=key.proof("POST", TOKEN_URL)).json()
    assert body["token_type"] == "DPoP"
    return body


def test_dpop_bound_subject_without_a_proof_is_invalid_grant(logged_in, public_app):
    subject = dpop_subject(logged_in, public_app, DPoPKey())
    refused(exchange(logged_in, public_app, subject["access_token"]), "invalid_grant")


def test_dpop_bound_subject_with_another_key_is_invalid_grant(logged_in, public_app):
    subject = dpop_subject(logged_in, public_app, DPoPKey())
    other = DPoPKey()
    response = exchange(
        logged_in, public_app, subject["access_token"], headers={"HTTP_DPOP": other.proof("POST", TOKEN_URL)}
    )
    refused(response, "invalid_grant")


def test_dpop_bound_subject_with_a_bad_proof_is_invalid_dpop_proof(logged_in, public_app):
    key = DPoPKey()
    subject = dpop_subject(logged_in, public_app, key)
    response = exchange(
        logged_in, public_app, subject["access_token"], headers={"HTTP_DPOP": key.proof("GET", TOKEN_URL)}
    )
    refused(response, "invalid_dpop_proof")


@pytest.mark.parametrize(
    "params",
    [
        {"subject_token": None},
        {"subject_token": ""},
        {"subject_token_type": None},
        {"subject_token_type": "urn:ietf:params:oauth:token-type:id_token"},
        {"subject_token_type": "access_token"},
        {"requested_token_type": "urn:ietf:params:oauth:token-type:jwt"},
        {"requested_token_type": REFRESH_TOKEN_TYPE},
        {"actor_token": "abc", "actor_token_type": ACCESS_TOKEN_TYPE},
        {"actor_token_type": ACCESS_TOKEN_TYPE},
    ],
    ids=repr,
)
def test_malformed_parameters_are_invalid_request(logged_in, public_app, subject, params):
    refused(exchange(logged_in, public_app, subject["access_token"], **params), "invalid_request")


@pytest.mark.parametrize("name", ["subject_token", "subject_token_type", "scope", "audience", "requested_token_type"])
def test_repeated_parameters_are_invalid_request(logged_in, public_app, subject, name):
    data = {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "client_id": public_app.client_id,
        "subject_token": subject["access_token"],
        "subject_token_type": ACCESS_TOKEN_TYPE,
        "resource": API_URI,
        "scope": "profile",
        "audience": API_URI,
        "requested_token_type": ACCESS_TOKEN_TYPE,
    }
    data[name] = [data[name], data[name]]
    refused(logged_in.post("/oauth/token", data), "invalid_request")


@pytest.mark.parametrize("value", ["\x00", "a\x00b", "é" * 3000, "' OR 1=1 --", "\r\nX-Injected: 1"])
@pytest.mark.parametrize("field", ["subject_token", "resource", "audience", "scope", "subject_token_type"])
def test_nasty_values_never_500(logged_in, public_app, subject, field, value):
    response = exchange(logged_in, public_app, subject["access_token"], **{field: value})
    assert 400 <= response.status_code < 500, response.content
    assert response.json()["error"] in ("invalid_request", "invalid_grant", "invalid_target", "invalid_scope")
    assert not TokenActor.objects.exists()


def test_reserved_parameter_cannot_set_the_actor(logged_in, public_app, subject):
    response = exchange(logged_in, public_app, subject["access_token"], mcp_act='{"sub": "admin"}')
    refused(response, "invalid_request")


def test_a_client_the_adapter_does_not_allow_gets_the_rfc_8693_error(logged_in, public_app, subject):
    # the reference site's adapter: only <site>/api with scope profile, only from another resource
    refused(
        exchange(logged_in, public_app, subject["access_token"], scope=None, resource="http://testserver/mcp"),
        "invalid_target",
    )
    refused(
        exchange(logged_in, public_app, subject["access_token"], resource=API_URI, scope="mcp profile"), "invalid_scope"
    )
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_EXCHANGE_REFUSED).count() == 2


def test_default_adapter_refuses_with_unauthorized_client(logged_in, public_app, subject, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": "mcp_oauth.adapter.DefaultMCPAdapter"}
    refused(exchange(logged_in, public_app, subject["access_token"]), "unauthorized_client")


def test_unauthenticated_confidential_client_is_invalid_client(logged_in, subject):
    Application = get_application_model()
    app = Application.objects.create(
        name="conf",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
    )
    response = exchange(logged_in, app, subject["access_token"], client_secret="wrong")
    refused(response, "invalid_client", status=401)


def test_resource_of_another_organization_is_invalid_target(logged_in, public_app, subject, user, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ADAPTER": allowing_adapter()}
    globex = Organization.objects.create(slug="globex", name="Globex")
    OrganizationMembership.objects.create(organization=globex, user=user)
    other = ProtectedResource.objects.create(uri="http://testserver/globex-api", scopes="profile", organization=globex)
    refused(exchange(logged_in, public_app, subject["access_token"], resource=other.uri), "invalid_target")


def test_inactive_user_subject_is_invalid_grant(logged_in, public_app, subject, user):
    type(user).objects.filter(pk=user.pk).update(is_active=False)
    refused(exchange(logged_in, public_app, subject["access_token"]), "invalid_grant")
