"""RFC 8693 token exchange through the real token endpoint: delegation to another protected resource
(with ``act``), down-scoping, the lifetime cap, DPoP, organizations, introspection, revocation, audit."""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.token_exchange.decision import ACCESS_TOKEN_TYPE, TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.models import AuditEvent, ClientProfile, DPoPBinding, TokenActor, TokenOrganization
from mcp_oauth.resource_server.cache import access_token_by_checksum, token_checksum
from tests.mcp_oauth.dpop.test_proof import TOKEN_URL
from tests.support.dpop_helpers import DPoPKey
from tests.support.oauth_helpers import basic, get_code, token_request
from tests.support.token_exchange_helpers import (
    API_URI,
    MCP_URI,
    api_profile,
    api_resource,
    exchange,
    subject_pair,
)


def test_delegation_to_the_api_carries_act_and_no_refresh_token(logged_in, public_app, user):
    subject = subject_pair(logged_in, public_app)
    response = exchange(logged_in, public_app, subject["access_token"])
    assert response.status_code == 200, response.content
    assert response["Cache-Control"] == "no-store"
    body = response.json()
    assert set(body) == {"access_token", "issued_token_type", "token_type", "expires_in", "scope"}
    assert body["issued_token_type"] == ACCESS_TOKEN_TYPE
    assert body["token_type"] == "Bearer"
    assert body["scope"] == "profile"
    assert 0 < body["expires_in"] <= subject["expires_in"]
    row = get_access_token_model().objects.get(token_checksum=token_checksum(body["access_token"]))
    assert row.user == user and row.application == public_app
    assert row.resource == [API_URI]
    assert row.scope == "profile"
    subject_row = get_access_token_model().objects.get(token_checksum=token_checksum(subject["access_token"]))
    assert row.expires <= subject_row.expires
    actor = TokenActor.objects.get(token_checksum=row.token_checksum)
    assert actor.act == {"sub": public_app.client_id}
    assert actor.subject_token_checksum == subject_row.token_checksum
    # the resource server: the API accepts it, the MCP endpoint does not (RFC 8707 audience)
    profile = api_profile(logged_in, body["access_token"])
    assert profile.status_code == 200, profile.content
    assert profile.json()["username"] == "alice"
    assert (
        logged_in.post(
            "/mcp", data="{}", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {body['access_token']}"
        ).status_code
        == 401
    )
    # the principal carries the actor, loaded with the token (one query, then cached)
    assert access_token_by_checksum(row.token_checksum).mcp_act == {"sub": public_app.client_id}
    event = AuditEvent.objects.filter(kind=AuditEvent.Kind.TOKEN_ISSUED).latest("id")
    assert event.detail["grant_type"] == TOKEN_EXCHANGE_GRANT_TYPE
    assert event.detail["act"] == {"sub": public_app.client_id}
    assert event.detail["subject_token_id"] == subject_row.pk
    assert event.detail["delegated"] is True
    assert event.detail["refresh_token_issued"] is False


def test_principal_actor_is_none_for_ordinary_tokens(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    cached = access_token_by_checksum(token_checksum(subject["access_token"]))
    assert cached.mcp_act is None


def test_principal_actor_reaches_the_resource_view(logged_in, public_app, django_assert_max_num_queries):
    from mcp_oauth.resource_server.authentication import BearerPrincipal

    subject = subject_pair(logged_in, public_app)
    body = exchange(logged_in, public_app, subject["access_token"]).json()
    token = access_token_by_checksum(token_checksum(body["access_token"]))
    principal = BearerPrincipal(
        user=token.user,
        application=token.application,
        access_token=token,
        scopes=frozenset({"profile"}),
        resource=api_resource(),
    )
    with django_assert_max_num_queries(0):
        assert principal.actor == {"sub": public_app.client_id}


def test_down_scoping_the_same_resource_has_no_act(logged_in, public_app, allow_all):
    subject = subject_pair(logged_in, public_app)
    response = exchange(logged_in, public_app, subject["access_token"], resource=None, scope="mcp")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["scope"] == "mcp"
    row = get_access_token_model().objects.get(token_checksum=token_checksum(body["access_token"]))
    assert row.resource == [MCP_URI]
    actor = TokenActor.objects.get(token_checksum=row.token_checksum)  # the subject, no act
    assert actor.act is None
    assert actor.subject_token_checksum == token_checksum(subject["access_token"])
    assert access_token_by_checksum(row.token_checksum).mcp_act is None


def test_no_scope_asked_means_the_subject_scopes_the_resource_serves(logged_in, public_app, allow_all):
    subject = subject_pair(logged_in, public_app)
    body = exchange(logged_in, public_app, subject["access_token"], scope=None).json()
    assert body["scope"] == "profile"  # the API serves profile only


def test_audience_names_the_resource(logged_in, public_app):
    subject = subject_pair(logged_in, public_app)
    response = exchange(logged_in, public_app, subject["access_token"], resource=None, audience=API_URI)
    assert response.status_code == 200, response.content
    row = get_access_token_model().objects.get(token_checksum=token_checksum(response.json()["access_token"]))
    assert row.resource == [API_URI]


def test_confidential_client_authenticates(logged_in, user, resource):
    Application = get_application_model()
    app = Application(
        name="conf",
        client_type="confidential",
        authorization_grant_type="authorization-code",
        redirect_uris="http://127.0.0.1/callback",
    )
    secret = app.client_secret
    app.save()
    code, verifier, _ = get_code(logged_in, app, scope="mcp profile")
    subject = token_request(logged_in, app, code, verifier, client_secret=secret).json()
    refused = exchange(logged_in, app, subject["access_token"], client_id=None)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    response = exchange(
        logged_in,
        app,
        subject["access_token"],
        client_id=None,
        headers={"HTTP_AUTHORIZATION": basic(app.client_id, secret)},
    )
    assert response.status_code == 200, response.content


def test_dpop_bound_subject_yields_a_token_bound_to_the_same_key(logged_in, public_app):
    key = DPoPKey()
    code, verifier, _ = get_code(logged_in, public_app, scope="mcp profile")
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": "http://127.0.0.1/callback",
        "client_id": public_app.client_id,
        "code_verifier": verifier,
    }
    subject = logged_in.post("/oauth/token", data, HTTP_DPOP=key.proof("POST", TOKEN_URL)).json()
    assert subject["token_type"] == "DPoP"
    response = exchange(
        logged_in, public_app, subject["access_token"], headers={"HTTP_DPOP": key.proof("POST", TOKEN_URL)}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "DPoP"
    assert DPoPBinding.objects.get(token_checksum=token_checksum(body["access_token"])).jkt == key.thumbprint
    ok = api_profile(
        logged_in,
        body["access_token"],
        scheme="DPoP",
        HTTP_DPOP=key.proof("GET", API_URI + "/profile", body["access_token"]),
    )
    assert ok.status_code == 200, ok.content


def test_introspection_returns_act(logged_in, public_app, user):
    subject = subject_pair(logged_in, public_app)
    body = exchange(logged_in, public_app, subject["access_token"]).json()
    Application = get_application_model()
    rs = Application(name="api rs", client_type="confidential", authorization_grant_type="client-credentials")
    secret = rs.client_secret
    rs.save()
    profile, _ = ClientProfile.objects.get_or_create(application=rs)
    profile.resource_server_for.set([api_resource()])
    answer = logged_in.post(
        "/oauth/introspect", {"token": body["access_token"]}, HTTP_AUTHORIZATION=basic(rs.client_id, secret)
    )
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["active"] is True
    assert data["act"] == {"sub": public_app.client_id}
    assert data["scope"] == "profile"


def test_revoking_the_connection_kills_exchanged_tokens(logged_in, public_app, user):
    subject = subject_pair(logged_in, public_app)
    body = exchange(logged_in, public_app, subject["access_token"]).json()
    assert api_profile(logged_in, body["access_token"]).status_code == 200
    revoke_user_grants(user, public_app, reason="user_disconnected")
    assert api_profile(logged_in, body["access_token"]).status_code == 401
    assert not get_access_token_model().objects.filter(token_checksum=token_checksum(body["access_token"])).exists()


def test_exchanged_token_follows_the_subject_organization(logged_in, public_app, user, allow_all):
    from mcp_oauth.models import Organization, OrganizationMembership

    organization = Organization.objects.create(slug="acme", name="Acme")
    OrganizationMembership.objects.create(organization=organization, user=user)
    subject = subject_pair(logged_in, public_app)
    # the consent page chose the user's one organization for the subject token
    assert (
        TokenOrganization.objects.get(token_checksum=token_checksum(subject["access_token"])).organization
        == organization
    )
    body = exchange(logged_in, public_app, subject["access_token"]).json()
    row = TokenOrganization.objects.get(token_checksum=token_checksum(body["access_token"]))
    assert row.organization == organization


def test_metadata_lists_the_grant(client, resource, settings):
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert TOKEN_EXCHANGE_GRANT_TYPE in data["grant_types_supported"]
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_EXCHANGE": False}
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert TOKEN_EXCHANGE_GRANT_TYPE not in data["grant_types_supported"]


def test_switched_off_the_grant_is_refused(logged_in, public_app, settings):
    subject = subject_pair(logged_in, public_app)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_EXCHANGE": False}
    response = exchange(logged_in, public_app, subject["access_token"])
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
def test_the_tool_context_sees_the_actor(logged_in, public_app, allow_all, settings, era):
    from django.test import Client

    from tests.support.organizations import legacy, modern, structured

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_REGISTRY": "tests.support.token_exchange_helpers.REGISTRY"}
    subject = subject_pair(logged_in, public_app)
    api_token = exchange(logged_in, public_app, subject["access_token"], scope="mcp profile").json()["access_token"]
    # back to the MCP endpoint on the user's behalf: a delegated token there, act nested
    delegated = exchange(logged_in, public_app, api_token, resource=MCP_URI, scope="mcp").json()["access_token"]
    call = {"name": "acting", "arguments": {}}
    if era == "2026-07-28":
        answer = structured(modern(Client(), "/mcp", delegated, "tools/call", call))
        plain = structured(modern(Client(), "/mcp", subject["access_token"], "tools/call", call))
    else:
        answers = []
        for token in (delegated, subject["access_token"]):
            opened = initialize(token)
            answers.append(structured(legacy(Client(), "/mcp", token, opened, "tools/call", call)))
        answer, plain = answers
    assert answer == {
        "user": "alice",
        "client_id": public_app.client_id,
        "actor": {"sub": public_app.client_id, "act": {"sub": public_app.client_id}},
    }
    assert plain["actor"] is None


def initialize(token: str) -> str:
    """A 2025-11-25 session for ``token``; its id."""
    import json

    from django.test import Client

    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    response = Client().post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"},
    )
    assert response.status_code == 200, response.content
    return response["Mcp-Session-Id"]


def test_an_exchange_for_a_jwt_resource_is_a_jwt_with_act_and_its_actor_row(logged_in, public_app, user):
    """RFC 8693 meets RFC 9068: the delegated token for a resource that opted in to JWT access
    tokens carries ``act`` as a claim, its TokenActor row follows the JWT's checksum (revocation by
    subject still finds it), and the resource server reads the actor from the claims, no query."""
    import base64
    import json

    from mcp_oauth.authorization_server.tokens import signing_keys

    api = api_resource()
    api.jwt_access_tokens = True
    api.save()
    signing_keys.rotate(publish_seconds=0)
    subject = subject_pair(logged_in, public_app)
    body = exchange(logged_in, public_app, subject["access_token"]).json()
    value = body["access_token"]
    claims = json.loads(base64.urlsafe_b64decode(value.split(".")[1] + "=="))
    assert claims["act"] == {"sub": public_app.client_id} and claims["aud"] == API_URI
    actor = TokenActor.objects.get(token_checksum=token_checksum(value))
    assert actor.subject_token_checksum == token_checksum(subject["access_token"])
    assert api_profile(logged_in, value).status_code == 200
    token = access_token_by_checksum(token_checksum(value))
    assert token.mcp_act == {"sub": public_app.client_id}
    revoked = logged_in.post("/oauth/revoke", {"token": subject["access_token"], "client_id": public_app.client_id})
    assert revoked.status_code == 200
    assert not get_access_token_model().objects.filter(token_checksum=token_checksum(value)).exists()
    assert api_profile(logged_in, value).status_code == 401
