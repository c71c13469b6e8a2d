"""Enterprise-Managed Authorization at the AS: ID-JAGs redeemed with the RFC 7523 jwt-bearer grant.

MCP ext-auth "Enterprise-Managed Authorization" §5.1 and draft-ietf-oauth-identity-assertion-authz-grant.
IdP keys are made in the test; the IdP's JWKS is served over HTTPS from loopback (test CA) or inline.
Every hostile input is refused with the error the profile names and no token row is written.
"""

from __future__ import annotations

import pytest
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import (
    AuditEvent,
    ClientProfile,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    ProtectedResource,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import claims, hs256_with_public_key, make_key, unsigned
from tests.support.oauth_helpers import basic

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ISSUER = "http://testserver"
IDP = "https://acme.idp.example"
TYP = "oauth-id-jag+jwt"


@pytest.fixture
def idp_key():
    return make_key("ES256")


@pytest.fixture
def chat_client(resource):
    """A confidential client registered in the admin: ``(application, plain secret)``."""
    Application = get_application_model()
    app = Application(name="chat", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    return app, secret


@pytest.fixture
def provider(resource, chat_client, idp_key, user):
    idp = EnterpriseIdentityProvider.objects.create(name="Acme", issuer=IDP, jwks=idp_key.jwks)
    idp.allowed_clients.add(chat_client[0])
    idp.allowed_resources.add(resource)
    EnterpriseIdentity.objects.create(provider=idp, subject="U019488227", user=user)
    return idp


def id_jag(key, app, resource_uri, **values):
    base = {
        "iss": IDP,
        "sub": "U019488227",
        "aud": ISSUER,
        "resource": resource_uri,
        "client_id": app.client_id,
        "scope": "mcp",
    }
    return key.sign(claims(**{**base, **values}), typ=TYP)


def redeem(client, app, secret, assertion, **extra):
    data = {"grant_type": JWT_BEARER, "assertion": assertion, **extra}
    return client.post(
        "/oauth/token",
        {k: v for k, v in data.items() if v is not None},
        HTTP_AUTHORIZATION=basic(app.client_id, secret),
    )


def assert_error(response, error, status=400):
    assert response.status_code == status, (response.status_code, response.content)
    assert response.json()["error"] == error, response.content
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
def test_id_jag_redeemed_for_an_audience_bound_user_token(client, provider, chat_client, idp_key, resource, user):
    app, secret = chat_client
    response = redeem(client, app, secret, id_jag(idp_key, app, resource.uri), resource=resource.uri)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "mcp"
    assert "refresh_token" not in body  # the client redeems a fresh ID-JAG instead
    token = get_access_token_model().objects.get()
    assert token.user == user and token.application == app and token.resource == [resource.uri]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_ISSUED)
    assert event.detail["grant_type"] == JWT_BEARER
    assert event.detail["idp"] == IDP and event.detail["sub"] == "U019488227"
    assert event.user == user


@pytest.mark.django_db
def test_client_authenticated_with_private_key_jwt(client, provider, chat_client, idp_key, resource):
    app, _ = chat_client
    client_key = make_key("RS256")
    ClientProfile.objects.create(application=app, jwks=client_key.jwks)
    client_assertion = client_key.sign(claims(iss=app.client_id, sub=app.client_id, aud=ISSUER))
    response = client.post(
        "/oauth/token",
        {
            "grant_type": JWT_BEARER,
            "assertion": id_jag(idp_key, app, resource.uri),
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": client_assertion,
        },
    )
    assert response.status_code == 200, response.content


@pytest.mark.django_db
def test_scope_is_the_intersection(client, provider, chat_client, idp_key, resource, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "SCOPES": {"mcp": "MCP", "read": "Read", "write": "W"}}
    app, secret = chat_client
    provider.allowed_scopes = "mcp read"
    provider.save()
    assertion = id_jag(idp_key, app, resource.uri, scope="mcp write read")
    response = redeem(client, app, secret, assertion, scope="read write")
    assert response.status_code == 200, response.content
    assert response.json()["scope"] == "read"  # write: not allowed by the IdP row
    none_left = redeem(client, app, secret, id_jag(idp_key, app, resource.uri, scope="mcp"), scope="write")
    assert none_left.status_code == 400 and none_left.json()["error"] == "invalid_scope"


@pytest.fixture
def other_client(resource):
    Application = get_application_model()
    app = Application(name="other", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    return app, secret


HOSTILE = {
    # case: (build the assertion, expected error, audit reason)
    "typ_missing": (
        lambda k, app, uri: k.sign(
            claims(iss=IDP, sub="U019488227", aud=ISSUER, resource=uri, client_id=app.client_id)
        ),
        "typ",
    ),
    "typ_jwt": (
        lambda k, app, uri: k.sign(
            claims(iss=IDP, sub="U019488227", aud=ISSUER, resource=uri, client_id=app.client_id), typ="JWT"
        ),
        "typ",
    ),
    "alg_none": (
        lambda k, app, uri: unsigned(
            claims(iss=IDP, sub="U019488227", aud=ISSUER, resource=uri, client_id=app.client_id), typ=TYP
        ),
        "alg",
    ),
    "hs256_public_key": (
        lambda k, app, uri: hs256_with_public_key(
            k, claims(iss=IDP, sub="U019488227", aud=ISSUER, resource=uri, client_id=app.client_id), typ=TYP
        ),
        "alg",
    ),
    "expired": (lambda k, app, uri: id_jag(k, app, uri, iat=1_000_000_000, exp=1_000_000_300), "exp"),
    "iat_missing": (lambda k, app, uri: id_jag(k, app, uri, iat=None), "iat"),
    "aud_wrong": (lambda k, app, uri: id_jag(k, app, uri, aud="https://auth.other.example"), "aud"),
    "aud_token_endpoint": (lambda k, app, uri: id_jag(k, app, uri, aud=ISSUER + "/oauth/token"), "aud"),
    "unknown_issuer": (lambda k, app, uri: id_jag(k, app, uri, iss="https://evil.idp.example"), "unknown_issuer"),
    "other_signer": (lambda k, app, uri: id_jag(make_key("ES256", kid=k.kid), app, uri), "signature"),
    "client_id_other": (lambda k, app, uri: id_jag(k, app, uri, client_id="someone-else"), "client_id"),
    "resource_missing": (lambda k, app, uri: id_jag(k, app, uri, resource=None), "resource"),
    "jti_missing": (lambda k, app, uri: id_jag(k, app, uri, jti=None), "jti"),
    "sub_unlinked": (lambda k, app, uri: id_jag(k, app, uri, sub="U-unknown"), "no_user"),
    "alg_not_allowed_for_idp": (lambda k, app, uri: id_jag(make_key("RS384", kid="r"), app, uri), "alg"),
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_id_jag_is_invalid_grant(client, provider, chat_client, idp_key, resource, case):
    app, secret = chat_client
    build, reason = HOSTILE[case]
    response = redeem(client, app, secret, build(idp_key, app, resource.uri))
    assert_error(response, "invalid_grant")
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ASSERTION_REFUSED)
    assert event.detail["reason"] == reason and event.detail["assertion_kind"] == "id_jag"


@pytest.mark.django_db
def test_replayed_id_jag_is_invalid_grant(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    assertion = id_jag(idp_key, app, resource.uri)
    assert redeem(client, app, secret, assertion).status_code == 200
    get_access_token_model().objects.all().delete()
    replay = redeem(client, app, secret, assertion)
    assert_error(replay, "invalid_grant")
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ASSERTION_REPLAYED).exists()


@pytest.mark.django_db
def test_resource_not_allowed_for_the_idp(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    other = ProtectedResource.objects.create(uri="http://testserver/other-mcp", scopes="mcp")
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, other.uri)), "invalid_grant")
    unknown = redeem(client, app, secret, id_jag(idp_key, app, "https://unknown.example/mcp"))
    assert_error(unknown, "invalid_target")
    mismatch = redeem(client, app, secret, id_jag(idp_key, app, resource.uri), resource=other.uri)
    assert_error(mismatch, "invalid_target")


@pytest.mark.django_db
def test_client_not_allowed_by_any_idp_is_unauthorized_client(client, provider, other_client, idp_key, resource):
    app, secret = other_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "unauthorized_client")


@pytest.mark.django_db
def test_client_allowed_by_another_idp_only(client, provider, other_client, idp_key, resource):
    app, secret = other_client
    second = EnterpriseIdentityProvider.objects.create(name="B", issuer="https://b.idp.example", jwks={"keys": []})
    second.allowed_clients.add(app)
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "invalid_grant")


@pytest.mark.django_db
def test_client_authentication_is_required(client, provider, chat_client, idp_key, resource, public_app):
    app, _ = chat_client
    assertion = id_jag(idp_key, app, resource.uri)
    wrong = client.post(
        "/oauth/token",
        {"grant_type": JWT_BEARER, "assertion": assertion},
        HTTP_AUTHORIZATION=basic(app.client_id, "wrong"),
    )
    assert_error(wrong, "invalid_client", 401)
    anonymous = client.post("/oauth/token", {"grant_type": JWT_BEARER, "assertion": assertion})
    assert_error(anonymous, "invalid_client", 401)
    public = client.post(
        "/oauth/token", {"grant_type": JWT_BEARER, "assertion": assertion, "client_id": public_app.client_id}
    )
    assert_error(public, "invalid_client", 401)


@pytest.mark.django_db
def test_missing_assertion_is_invalid_request(client, provider, chat_client):
    app, secret = chat_client
    response = client.post("/oauth/token", {"grant_type": JWT_BEARER}, HTTP_AUTHORIZATION=basic(app.client_id, secret))
    assert_error(response, "invalid_request")


@pytest.mark.django_db
def test_disabled_idp_is_unknown(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    provider.enabled = False
    provider.save()
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "unauthorized_client")


# --- the IdP's JWKS URL ------------------------------------------------------------------------


@pytest.mark.django_db
def test_idp_jwks_url_fetched_over_https(client, provider, chat_client, idp_key, resource, cimd_env):
    cimd_env.server.serve("/idp-keys.json", body=idp_key.jwks, headers={"Cache-Control": "max-age=300"})
    provider.jwks = None
    provider.jwks_uri = cimd_env.url("/idp-keys.json")
    provider.save()
    app, secret = chat_client
    for _ in range(2):
        assert redeem(client, app, secret, id_jag(idp_key, app, resource.uri)).status_code == 200
    assert len(cimd_env.server.fetches("/idp-keys.json")) == 1


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["10.1.2.3", "169.254.169.254", "127.0.0.1", "100.64.0.1"])
def test_idp_jwks_url_on_a_private_address_is_refused(
    client, provider, chat_client, idp_key, resource, cimd_env, address
):
    cimd_env.allow_loopback(False)
    cimd_env.dns.names["keys.acme.test"] = [address]
    cimd_env.server.serve("/idp-keys.json", body=idp_key.jwks)
    provider.jwks = None
    provider.jwks_uri = cimd_env.server.url("/idp-keys.json", host="keys.acme.test")
    provider.save()
    app, secret = chat_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "invalid_grant")
    assert not cimd_env.server.fetches()
    assert not cimd_env.guard.refused
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ASSERTION_REFUSED)
    assert event.detail["reason"] == "non_public_address"


@pytest.mark.django_db
def test_switched_off_the_grant_is_unauthorized_and_not_advertised(
    client, provider, chat_client, idp_key, resource, settings
):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ENTERPRISE_MANAGED_AUTHORIZATION": False}
    app, secret = chat_client
    assert_error(redeem(client, app, secret, id_jag(idp_key, app, resource.uri)), "unauthorized_client")
    metadata = client.get("/.well-known/oauth-authorization-server").json()
    assert JWT_BEARER not in metadata["grant_types_supported"]
