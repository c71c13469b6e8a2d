"""JWT access tokens (RFC 9068) as the token endpoint issues them: the header and claims, the row kept
beside each (revocation, introspection), the opaque fallback, ``act`` (RFC 8693 §4.1) and the
organization claim."""

from __future__ import annotations

import hashlib

import pytest
from django.test import RequestFactory
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.models import AccessTokenSigningKey, ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from tests.support.jwt_access_tokens import RESOURCE, jwt_resource, logged_in, segments  # noqa: F401 - fixtures
from tests.support.oauth_helpers import bearer_works, first_pair

pytestmark = pytest.mark.django_db


def test_a_jwt_resource_gets_an_rfc9068_token_and_the_row_is_written(logged_in, jwt_resource, user, public_app):
    pair = first_pair(logged_in, public_app)
    token = pair["access_token"]
    header, claims = segments(token)
    key = AccessTokenSigningKey.objects.get()
    assert header == {"alg": "ES256", "typ": "at+jwt", "kid": key.kid}
    assert claims["iss"] == "http://testserver"
    assert claims["sub"] == str(user.pk)
    assert claims["aud"] == RESOURCE
    assert claims["client_id"] == public_app.client_id
    assert claims["scope"] == "mcp"
    assert claims["exp"] - claims["iat"] == pair["expires_in"] == 3600
    assert len(claims["jti"]) >= 20
    assert "cnf" not in claims and "act" not in claims and "organization" not in claims
    row = get_access_token_model().objects.get()
    assert row.token_checksum == hashlib.sha256(token.encode()).hexdigest()
    assert bearer_works(logged_in, token)


def test_an_opaque_resource_keeps_opaque_tokens(logged_in, resource, public_app):
    signing_keys.rotate()
    token = first_pair(logged_in, public_app)["access_token"]
    assert token.count(".") == 0 and len(token) == 43


def test_no_signing_key_issues_an_opaque_token(logged_in, resource, public_app, caplog):
    resource.jwt_access_tokens = True
    resource.save()
    token = first_pair(logged_in, public_app)["access_token"]
    assert "." not in token
    assert bearer_works(logged_in, token)
    assert "no access-token signing key" in caplog.text


def test_the_act_claim_of_a_token_exchange(jwt_resource, public_app, user):
    from types import SimpleNamespace

    from mcp_oauth.authorization_server.tokens.jwt_access import access_token_claims

    act = {"sub": "agent-7", "act": {"sub": "orchestrator"}}
    request = SimpleNamespace(client=public_app, user=user, mcp_act=act)
    claims = access_token_claims({"scope": "mcp", "expires_in": 300}, request, jwt_resource, 1_000)
    assert claims["act"] == act
    assert (claims["iat"], claims["exp"], claims["sub"]) == (1_000, 1_300, str(user.pk))
    machine = access_token_claims(
        {"scope": "mcp", "expires_in": 60}, SimpleNamespace(client=public_app, user=None), jwt_resource, 5
    )
    assert machine["sub"] == public_app.client_id and "act" not in machine


def test_an_organization_token_names_it_and_membership_loss_denies_it(client, user, public_app, jwt_resource):
    from mcp_oauth.models import OrganizationMembership
    from tests.support.oauth_helpers import token_request
    from tests.support.organization_helpers import add_member, code_for, make_organization, organization_endpoint

    acme = make_organization("acme", "Acme Corp")
    add_member(user, acme)
    endpoint = organization_endpoint(acme)
    endpoint.jwt_access_tokens = True
    endpoint.save()
    client.force_login(user)
    code, verifier = code_for(client, public_app, resource=endpoint.uri)
    response = token_request(client, public_app, code, verifier, resource=endpoint.uri)
    assert response.status_code == 200, response.content
    token = response.json()["access_token"]
    claims = segments(token)[1]
    assert claims["aud"] == endpoint.uri
    assert claims["organization"] == {"id": acme.pk, "slug": "acme"}
    request = RequestFactory().get("/mcp/o/acme", HTTP_AUTHORIZATION=f"Bearer {token}")
    resource = ProtectedResource.objects.get(uri=endpoint.uri)
    assert authenticate_bearer(request, resource).organization.pk == acme.pk
    OrganizationMembership.objects.filter(user=user, organization=acme).delete()
    with pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(RequestFactory().get("/mcp/o/acme", HTTP_AUTHORIZATION=f"Bearer {token}"), resource)
    assert refused.value.status == 401 and refused.value.error_description == "The access token was revoked."


def test_a_client_credentials_jwt_speaks_for_the_client(client, jwt_resource, service):
    from tests.support.oauth_helpers import basic

    app, secret = service
    response = client.post(
        "/oauth/token",
        {"grant_type": "client_credentials", "scope": "mcp", "resource": RESOURCE},
        HTTP_AUTHORIZATION=basic(app.client_id, secret),
    )
    assert response.status_code == 200, response.content
    token = response.json()["access_token"]
    assert segments(token)[1]["sub"] == app.client_id
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    principal = authenticate_bearer(request, ProtectedResource.objects.get(uri=RESOURCE))
    assert principal.is_machine and principal.user is None and principal.client_id == app.client_id
