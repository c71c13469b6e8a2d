"""``private_key_jwt`` client authentication (RFC 7523 §2.2, §3) and the client credentials extension.

Real keys made in the test, real signed JWTs, Django's test client against the token endpoint;
key sets served over HTTPS by a loopback server with a test CA (``tests/support/https_server.py``).
Every hostile assertion is refused with ``invalid_client`` (401), never a 500, and no token row
is written.
"""

from __future__ import annotations

import time
from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.client_auth import jwks as jwks_module
from mcp_oauth.checks import check_assertion_algorithms
from mcp_oauth.models import AuditEvent, ClientProfile, UsedAssertion
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import claims, hs256_with_public_key, make_key, unsigned
from tests.support.oauth_helpers import authorize_params, basic, get_code, pkce_pair, token_request

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ISSUER = "http://testserver"
TOKEN_ENDPOINT = "http://testserver/oauth/token"


@pytest.fixture
def key():
    return make_key("RS256")


@pytest.fixture
def jwt_client(resource, key):
    """A client_credentials client registered in the admin with inline ``jwks``: ``(application, secret)``."""
    Application = get_application_model()
    app = Application(name="machine", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    ClientProfile.objects.create(application=app, jwks=key.jwks)
    return app, secret


def client_claims(app, **values):
    return claims(**{"iss": app.client_id, "sub": app.client_id, "aud": ISSUER, **values})


def cc_request(client, assertion, *, assertion_type=ASSERTION_TYPE, **extra):
    data = {"grant_type": "client_credentials", "client_assertion_type": assertion_type, "client_assertion": assertion}
    data.update(extra)
    return client.post("/oauth/token", {k: v for k, v in data.items() if v is not None})


def assert_invalid_client(response):
    assert response.status_code == 401, (response.status_code, response.content)
    assert response.json()["error"] == "invalid_client"
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("alg", ["RS256", "PS256", "ES256", "EdDSA"])
def test_client_credentials_with_private_key_jwt(client, resource, alg):
    key = make_key(alg)
    Application = get_application_model()
    app = Application.objects.create(
        name="m", client_type="confidential", authorization_grant_type="client-credentials"
    )
    ClientProfile.objects.create(application=app, jwks=key.jwks)

    response = cc_request(client, key.sign(client_claims(app)), resource=resource.uri, scope="mcp")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "Bearer" and body["scope"] == "mcp" and "refresh_token" not in body
    token = get_access_token_model().objects.get()
    assert token.application == app and token.user is None and token.resource == [resource.uri]
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.TOKEN_ISSUED)
    assert event.detail["client_auth"] == "private_key_jwt" and event.detail["grant_type"] == "client_credentials"
    assert UsedAssertion.objects.filter(kind="client_assertion").count() == 1


@pytest.mark.django_db
def test_client_id_parameter_must_match_sub(client, jwt_client, key):
    app, _ = jwt_client
    ok = cc_request(client, key.sign(client_claims(app)), client_id=app.client_id)
    assert ok.status_code == 200, ok.content
    get_access_token_model().objects.all().delete()
    assert_invalid_client(cc_request(client, key.sign(client_claims(app)), client_id="someone-else"))


@pytest.mark.django_db
def test_client_secret_still_works_for_the_same_client(client, jwt_client):
    app, secret = jwt_client
    response = client.post(
        "/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic(app.client_id, secret)
    )
    assert response.status_code == 200, response.content


HOSTILE = {
    "alg_none": lambda app, key: unsigned(client_claims(app)),
    "hs256_with_public_key": lambda app, key: hs256_with_public_key(key, client_claims(app)),
    "expired": lambda app, key: key.sign(client_claims(app, iat=1_000_000_000, exp=1_000_000_300)),
    "exp_missing": lambda app, key: key.sign(client_claims(app, exp=None)),
    "exp_too_far": lambda app, key: key.sign(client_claims(app, exp=2_000_000_000_0)),
    "exp_not_number": lambda app, key: key.sign(client_claims(app, exp="tomorrow")),
    "iat_future": lambda app, key: key.sign(client_claims(app, iat=int(time.time()) + 600)),
    "nbf_future": lambda app, key: key.sign(client_claims(app, nbf=4_000_000_000)),
    "aud_wrong": lambda app, key: key.sign(client_claims(app, aud="https://attacker.example")),
    "aud_token_endpoint": lambda app, key: key.sign(client_claims(app, aud=TOKEN_ENDPOINT)),
    "aud_list_with_other": lambda app, key: key.sign(client_claims(app, aud=[ISSUER, "https://other.example"])),
    "aud_missing": lambda app, key: key.sign(client_claims(app, aud=None)),
    "iss_not_client": lambda app, key: key.sign(client_claims(app, iss="someone-else")),
    "jti_missing": lambda app, key: key.sign(client_claims(app, jti=None)),
    "jti_not_string": lambda app, key: key.sign(client_claims(app, jti=12345)),
    "other_key": lambda app, key: make_key("RS256", kid=key.kid).sign(client_claims(app)),
    "unknown_kid": lambda app, key: make_key("RS256").sign(client_claims(app)),
    "id_jag_typ": lambda app, key: key.sign(client_claims(app), typ="oauth-id-jag+jwt"),
    "alg_mismatch_key": lambda app, key: make_key("ES256", kid=key.kid).sign(client_claims(app)),
    "crit_header": lambda app, key: key.sign(client_claims(app), crit=["exp"]),
    "not_a_jwt": lambda app, key: "not.a.jwt",
    "two_parts": lambda app, key: "eyJhbGciOiJSUzI1NiJ9.e30",
    "garbage_json": lambda app, key: "eyJhbGciOiJSUzI1NiJ9.bm90anNvbg.c2ln",
}

#: The audit reason each hostile case is refused for (the check that caught it).
REASONS = {
    "alg_mismatch_key": "key",
    "alg_none": "alg",
    "aud_list_with_other": "aud",
    "aud_missing": "aud",
    "aud_token_endpoint": "aud",
    "aud_wrong": "aud",
    "crit_header": "crit",
    "exp_missing": "exp",
    "exp_not_number": "exp",
    "exp_too_far": "exp",
    "expired": "exp",
    "garbage_json": "malformed",
    "hs256_with_public_key": "alg",
    "iat_future": "iat",
    "id_jag_typ": "typ",
    "iss_not_client": "iss",
    "jti_missing": "jti",
    "jti_not_string": "jti",
    "nbf_future": "nbf",
    "not_a_jwt": "malformed",
    "other_key": "signature",
    "two_parts": "malformed",
    "unknown_kid": "key",
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_client_assertion_is_invalid_client(client, jwt_client, key, case):
    app, _ = jwt_client
    response = cc_request(client, HOSTILE[case](app, key))
    assert_invalid_client(response)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ASSERTION_REFUSED)
    assert event.detail["reason"] == REASONS[case]
    assert event.client_id in ("", app.client_id)


@pytest.mark.django_db
def test_token_endpoint_audience_only_when_allowed(client, jwt_client, key, settings):
    app, _ = jwt_client
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CLIENT_ASSERTION_ACCEPT_TOKEN_ENDPOINT_AUDIENCE": True}
    assert cc_request(client, key.sign(client_claims(app, aud=TOKEN_ENDPOINT))).status_code == 200


@pytest.mark.django_db
def test_client_without_registered_keys_is_invalid_client(client, service, key):
    app, _ = service
    response = cc_request(client, key.sign(client_claims(app)))
    assert_invalid_client(response)
    assert "not registered for private_key_jwt" in response.json()["error_description"]


# --- jwks_uri: fetched with the CIMD fetcher's SSRF rules ------------------------------------------


@pytest.fixture
def uri_client(resource, key, cimd_env):
    cimd_env.server.serve("/jwks.json", body=key.jwks, headers={"Cache-Control": "max-age=600"})
    Application = get_application_model()
    app = Application.objects.create(
        name="m", client_type="confidential", authorization_grant_type="client-credentials"
    )
    ClientProfile.objects.create(application=app, jwks_uri=cimd_env.url("/jwks.json"))
    return app


@pytest.mark.django_db
def test_jwks_uri_fetched_once_and_cached(client, uri_client, key, cimd_env):
    for _ in range(3):
        assert cc_request(client, key.sign(client_claims(uri_client))).status_code == 200
    assert len(cimd_env.server.fetches("/jwks.json")) == 1


@pytest.mark.django_db
def test_jwks_uri_rotation_refetches_on_unknown_kid(client, uri_client, key, cimd_env, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWKS_REFETCH_SECONDS": 0}
    assert cc_request(client, key.sign(client_claims(uri_client))).status_code == 200
    new_key = make_key("ES256")
    cimd_env.server.serve("/jwks.json", body={"keys": [key.public_jwk, new_key.public_jwk]})
    assert cc_request(client, new_key.sign(client_claims(uri_client))).status_code == 200
    assert len(cimd_env.server.fetches("/jwks.json")) == 2


@pytest.mark.django_db
@pytest.mark.parametrize("address", ["10.0.0.7", "169.254.169.254", "127.0.0.1", "::ffff:127.0.0.1"])
def test_jwks_uri_on_private_address_is_refused(client, uri_client, key, cimd_env, address):
    cimd_env.allow_loopback(False)
    cimd_env.dns.names["keys.cimd.test"] = [address]
    ClientProfile.objects.filter(application=uri_client).update(
        jwks_uri=cimd_env.server.url("/jwks.json", host="keys.cimd.test")
    )
    response = cc_request(client, key.sign(client_claims(uri_client)))
    assert_invalid_client(response)
    assert not cimd_env.server.fetches("/jwks.json")
    assert not cimd_env.guard.refused  # nothing but loopback was even tried
    lookups = len(cimd_env.dns.lookups)
    assert_invalid_client(cc_request(client, key.sign(client_claims(uri_client))))
    assert len(cimd_env.dns.lookups) == lookups  # the refusal is remembered: no second resolution
    reasons = set(
        AuditEvent.objects.filter(kind=AuditEvent.Kind.ASSERTION_REFUSED).values_list("detail__reason", flat=True)
    )
    assert reasons == {"non_public_address"}


@pytest.mark.django_db
def test_jwks_uri_with_private_key_material_is_refused(client, uri_client, key, cimd_env):
    leaked = {**key.public_jwk, "d": "AAAA"}
    cimd_env.server.serve("/jwks.json", body={"keys": [leaked]})
    assert_invalid_client(cc_request(client, key.sign(client_claims(uri_client))))


# --- CIMD clients with private_key_jwt ---------------------------------------------------------


@pytest.mark.django_db
def test_cimd_client_with_private_key_jwt_and_jwks_uri(client, user, resource, key, cimd_env):
    cimd_env.server.serve("/client-keys.json", body=key.jwks)
    client_id = cimd_env.publish(
        "/pkjwt-client.json",
        token_endpoint_auth_method="private_key_jwt",
        jwks_uri=cimd_env.url("/client-keys.json"),
    )
    client.force_login(user)
    app_stub = type("App", (), {"client_id": client_id})()
    code, verifier, _ = get_code(client, app_stub)
    application = get_application_model().objects.get(client_id=client_id)
    assert application.client_type == "confidential"

    without = token_request(client, app_stub, code, verifier)  # no authentication: refused
    assert without.status_code == 401 and without.json()["error"] == "invalid_client"

    code, verifier, _ = get_code(client, app_stub)
    assertion = key.sign(claims(iss=client_id, sub=client_id, aud=ISSUER))
    response = token_request(
        client, app_stub, code, verifier, client_assertion_type=ASSERTION_TYPE, client_assertion=assertion
    )
    assert response.status_code == 200, response.content
    assert "refresh_token" in response.json()


@pytest.mark.django_db
def test_cimd_document_with_private_key_jwt_but_no_keys_is_refused(client, user, resource, cimd_env):
    client_id = cimd_env.publish("/nokeys.json", token_endpoint_auth_method="private_key_jwt")
    client.force_login(user)
    app_stub = type("App", (), {"client_id": client_id})()
    _, challenge = pkce_pair()
    page = client.get("/oauth/authorize?" + urlencode(authorize_params(app_stub, challenge)))
    assert page.status_code == 400
    assert b"private_key_jwt needs jwks" in page.content


# --- replay refused across workers --------------------------------------------------------------


def test_jwks_module_refuses_malformed_sets():
    for value in (None, {}, {"keys": "x"}, {"keys": [1]}, {"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}):
        with pytest.raises(jwks_module.KeysUnavailable):
            jwks_module.checked_key_set(value)


@pytest.mark.django_db
def test_system_check_refuses_forbidden_algorithms(settings):
    assert check_assertion_algorithms(None) == []
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ASSERTION_ALGORITHMS": ["RS256", "HS256", "none"]}
    errors = check_assertion_algorithms(None)
    assert [e.id for e in errors] == ["mcp_oauth.E090"] and "HS256, none" in errors[0].msg
